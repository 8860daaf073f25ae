package daemon

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/flowd/flowd/rpc"
)

// workerRegistry remembers, on the leader, which workers long-poll for
// which queues and types. It is observability only (workers.list, the TUI):
// losing it on failover loses nothing; it refills at the next claims.
type workerRegistry struct {
	mu      sync.Mutex
	workers map[string]*rpc.Worker
	byTask  map[string]string // task id -> worker, from heartbeats
}

func newWorkerRegistry() *workerRegistry {
	return &workerRegistry{workers: map[string]*rpc.Worker{}, byTask: map[string]string{}}
}

// forgetAfter drops workers not seen for this long.
const forgetAfter = 2 * time.Minute

func (r *workerRegistry) waiting(p rpc.ClaimParams, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.workers[p.WorkerID]
	if w == nil {
		w = &rpc.Worker{ID: p.WorkerID}
		r.workers[p.WorkerID] = w
	}
	w.Queues, w.Types = slices.Clone(p.Queues), slices.Clone(p.Types)
	w.Waiting, w.LastSeen, w.Node = true, time.Now().UTC(), node
}

func (r *workerRegistry) doneWaiting(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.workers[id]; w != nil {
		w.Waiting, w.LastSeen = false, time.Now().UTC()
	}
}

// assigned records which worker holds which tasks, for heartbeat ages.
func (r *workerRegistry) assigned(worker string, taskIDs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range taskIDs {
		r.byTask[id] = worker
	}
	if len(r.byTask) > 100_000 { // bounded: forget the oldest knowledge wholesale
		r.byTask = map[string]string{}
	}
}

func (r *workerRegistry) heartbeat(taskID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.byTask[taskID]; ok {
		if w := r.workers[id]; w != nil {
			w.LastHeartbeat, w.LastSeen = time.Now().UTC(), time.Now().UTC()
		}
	}
}

// list returns the known workers with in-flight counts from the leases.
func (r *workerRegistry) list(inFlight map[string]int) []rpc.Worker {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for id, w := range r.workers {
		if now.Sub(w.LastSeen) > forgetAfter && inFlight[id] == 0 && !w.Waiting {
			delete(r.workers, id)
		}
	}
	var out []rpc.Worker
	for id, n := range inFlight {
		if r.workers[id] == nil {
			r.workers[id] = &rpc.Worker{ID: id, LastSeen: now.UTC()}
		}
		_ = n
	}
	for _, w := range r.workers {
		c := *w
		c.InFlight = inFlight[w.ID]
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
