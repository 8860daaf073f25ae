package daemon

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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
	// gone: workers whose claim connection ended (a drained worker
	// half-closes it); listed only while they hold leases, forgotten once
	// they hold none, unless they claim again.
	gone map[string]bool
	// epoch is the leadership term the registry last saw claims in and
	// since when: a new leader knows none of the workers yet, so for
	// --idle-type-after after it took office no type counts as unserved.
	epoch context.Context
	since time.Time
	// On a follower: the leader's last answer (idle_types.go), and the
	// lock that keeps one question to the leader in flight.
	fetchMu sync.Mutex
	remote  *servedAnswer
	// idleAfter is --idle-type-after in ns (0: the default).
	idleAfter atomic.Int64
}

func newWorkerRegistry() *workerRegistry {
	return &workerRegistry{workers: map[string]*rpc.Worker{}, byTask: map[string]string{}, gone: map[string]bool{}}
}

// forgetAfter drops workers not seen for this long.
const forgetAfter = 2 * time.Minute

// lead notes the leadership term (the leader's LeaderEpoch) the registry
// serves in; the caller holds mu.
func (r *workerRegistry) lead(epoch context.Context, now time.Time) {
	if epoch != nil && r.epoch != epoch {
		r.epoch, r.since = epoch, now
	}
}

// tookOffice notes that this node leads in epoch since office (its
// learning window's start).
func (r *workerRegistry) tookOffice(epoch context.Context, office time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch, r.since = epoch, office
}

// waiting records a long-poll claim arriving at the leader.
func (r *workerRegistry) waiting(p rpc.ClaimParams, node string, epoch context.Context) {
	r.claimed(p, node, epoch)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.workers[p.WorkerID].Waiting = true
}

// claimed records that a worker asked for tasks (a long poll, or a
// completion that claims the next one).
func (r *workerRegistry) claimed(p rpc.ClaimParams, node string, epoch context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now().UTC()
	r.lead(epoch, now)
	w := r.workers[p.WorkerID]
	if w == nil {
		w = &rpc.Worker{ID: p.WorkerID}
		r.workers[p.WorkerID] = w
	}
	if !slices.Equal(w.Queues, p.Queues) || !slices.Equal(w.Types, p.Types) {
		w.Queues, w.Types = slices.Clone(p.Queues), slices.Clone(p.Types)
	}
	if p.Slots > 0 {
		w.Slots = p.Slots
	}
	delete(r.gone, p.WorkerID)
	w.LastSeen, w.LastClaim, w.Node = now, now, node
}

func (r *workerRegistry) doneWaiting(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.workers[id]; w != nil {
		w.Waiting, w.LastSeen = false, time.Now().UTC()
	}
}

// left records that a worker's claim ended because its connection's input
// did: it stopped claiming (drained, or lost its connection, when its next
// claim brings it back).
func (r *workerRegistry) left(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.workers[id]; w != nil {
		w.Waiting = false
		r.gone[id] = true
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
		if (now.Sub(w.LastSeen) > forgetAfter || r.gone[id]) && inFlight[id] == 0 && !w.Waiting {
			delete(r.workers, id)
			delete(r.gone, id)
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

// served returns the claim filters of the workers in contact within after
// (waiting in a claim, or seen claiming or heartbeating), deduplicated, and
// whether the registry has watched this leadership term that long (known).
func (r *workerRegistry) served(after time.Duration, epoch context.Context) (filters []rpc.ServedFilter, known bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.lead(epoch, now.UTC())
	seen := map[string]bool{}
	for _, w := range r.workers {
		if !w.Waiting && now.Sub(w.LastSeen) > after {
			continue
		}
		if w.LastClaim.IsZero() {
			continue // known only from a lease: its filter is unknown
		}
		k := strings.Join(w.Queues, "\x00") + "\x01" + strings.Join(w.Types, "\x00")
		if seen[k] {
			continue
		}
		seen[k] = true
		filters = append(filters, rpc.ServedFilter{Queues: slices.Clone(w.Queues), Types: slices.Clone(w.Types)})
	}
	sort.Slice(filters, func(i, j int) bool {
		if c := slices.Compare(filters[i].Queues, filters[j].Queues); c != 0 {
			return c < 0
		}
		return slices.Compare(filters[i].Types, filters[j].Types) < 0
	})
	return filters, !r.since.IsZero() && now.Sub(r.since) >= after
}
