package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/rpc"
)

// Queues of the workload. q1 is the "max_attempts: 1 everywhere" variant:
// its tasks have one attempt, no deliberate failure, and stalling workers
// never claim from it, so every failed q1 run is an attempt spent by a
// fault. qs has retries, deliberate first-attempt failures and the
// stalling workers.
const (
	q1      = "q1"
	qs      = "qs"
	q1Lease = 4000 // ms
	qsLease = 1500 // ms
)

func spec(queue string, failFirst bool) json.RawMessage {
	if queue == q1 {
		return json.RawMessage(fmt.Sprintf(`{"name":"chaos-q1","tasks":[{"key":"t","type":"work","queue":%q,"retry":{"max_attempts":1},"lease_ms":%d}]}`, q1, q1Lease))
	}
	return json.RawMessage(fmt.Sprintf(`{"name":"chaos-qs","tasks":[{"key":"t","type":"work","queue":%q,"input":{"fail_first":%t},`+
		`"retry":{"max_attempts":8,"initial_backoff_ms":50,"max_backoff_ms":500},"lease_ms":%d}]}`, qs, failFirst, qsLease))
}

// Record is everything the workload observed, for the checkers.
type Record struct {
	mu sync.Mutex
	// acked: run id -> queue, for every run.submit that was answered.
	Acked map[string]string
	// received: task id -> fencing token -> the worker kind that got it
	// in a claim reply ("worker" or "staller").
	Received map[string]map[uint64]string
	// successes: task id -> tokens whose task.complete answered accepted.
	Successes map[string]map[uint64]bool
	// StaleAccepted lists stale-token writes that were accepted.
	StaleAccepted []string
	// ClaimFailures: worker id -> its task.claim calls that returned an
	// error (when, how long, what), to explain orphan leases.
	ClaimFailures map[string][]ClaimFailure

	SubmitCalls, SubmitErrors, CreatedFalse, SlowSubmits atomic.Int64
	ClaimCalls, ClaimErrors                              atomic.Int64
	Completes, Fails, LeasesLost                         atomic.Int64
	StaleWrites, StallTimeouts                           atomic.Int64
	MaxSubmit                                            atomic.Int64 // ns
}

// NewRecord returns an empty record.
func NewRecord() *Record {
	return &Record{Acked: map[string]string{}, Received: map[string]map[uint64]string{}, Successes: map[string]map[uint64]bool{},
		ClaimFailures: map[string][]ClaimFailure{}}
}

// clientLog records what a worker's client logs at debug level (its
// fail-overs and re-sends inside one call) as that worker's claim
// "failures" of zero duration, so an orphan lease's note shows the retries
// a call hid from its caller.
type clientLog struct {
	rec    *Record
	worker string
	attrs  []slog.Attr
}

func (h clientLog) Enabled(context.Context, slog.Level) bool { return true }

func (h clientLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("client: " + r.Message)
	for _, a := range h.attrs {
		b.WriteString(" " + a.String())
	}
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	h.rec.mu.Lock()
	h.rec.ClaimFailures[h.worker] = append(h.rec.ClaimFailures[h.worker], ClaimFailure{Start: r.Time, Err: b.String()})
	h.rec.mu.Unlock()
	return nil
}

func (h clientLog) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(slices.Clip(h.attrs), as...)
	return h
}

func (h clientLog) WithGroup(string) slog.Handler { return h }

// ClaimFailure is one task.claim call that returned an error.
type ClaimFailure struct {
	Start time.Time
	Took  time.Duration
	Err   string
}

func (r *Record) claimFailed(worker string, start time.Time, err error) {
	r.mu.Lock()
	r.ClaimFailures[worker] = append(r.ClaimFailures[worker], ClaimFailure{Start: start, Took: time.Since(start), Err: err.Error()})
	r.mu.Unlock()
}

func (r *Record) received(task string, token uint64, kind string) {
	r.mu.Lock()
	m := r.Received[task]
	if m == nil {
		m = map[uint64]string{}
		r.Received[task] = m
	}
	m[token] = kind
	r.mu.Unlock()
}

// Workload runs submitters and workers against the cluster.
type Workload struct {
	log  *slog.Logger
	c    *Cluster
	rec  *Record
	rate float64 // submits per second, all submitters together

	submitCtx  context.Context
	stopSubmit context.CancelFunc
	workCtx    context.Context
	stopWork   context.CancelFunc
	subWG      sync.WaitGroup
	workWG     sync.WaitGroup
	clients    []*rpc.Client
}

// WorkloadOptions size the workload.
type WorkloadOptions struct {
	Submitters, Workers, Stallers int
	Rate                          float64 // submits/s in total
	QSShare                       float64 // fraction of runs in qs
}

func (w *Workload) client(home *Agent, pinned bool, worker string) *rpc.Client {
	var eps []string
	if pinned {
		eps = append(eps, "unix://"+home.Sock)
	}
	for _, a := range w.c.Members() {
		if !pinned || a != home {
			eps = append(eps, "unix://"+a.Sock)
		}
	}
	o := rpc.ClientOptions{MaxAttempts: 20, BackoffCap: 300 * time.Millisecond, DialTimeout: time.Second,
		Logger: slog.New(slog.DiscardHandler)}
	if worker != "" {
		o.Logger = slog.New(clientLog{rec: w.rec, worker: worker})
	}
	if pinned {
		// The current connection stays on home while its socket answers: its
		// agent forwards writes and claims to the leader.
		o.Route = rpc.RouteAny
	}
	cl, err := rpc.NewClient(eps, o)
	if err != nil {
		panic(err) // endpoints are ours
	}
	w.clients = append(w.clients, cl)
	return cl
}

// StartWorkload starts everything; Stop* end it.
func StartWorkload(log *slog.Logger, c *Cluster, rec *Record, o WorkloadOptions) *Workload {
	w := &Workload{log: log, c: c, rec: rec, rate: o.Rate}
	w.submitCtx, w.stopSubmit = context.WithCancel(context.Background())
	w.workCtx, w.stopWork = context.WithCancel(context.Background())
	members := c.Members()
	for i := range o.Workers {
		home := members[i%len(members)]
		id := fmt.Sprintf("w%d-%s", i, home.ID)
		cl := w.client(home, i%2 == 0, id)
		w.workWG.Add(1)
		go w.worker(id, cl, false)
	}
	for i := range o.Stallers {
		home := members[(i+1)%len(members)]
		id := fmt.Sprintf("stall%d-%s", i, home.ID)
		cl := w.client(home, i%2 == 1, id)
		w.workWG.Add(1)
		go w.worker(id, cl, true)
	}
	per := o.Rate / float64(max(1, o.Submitters))
	for i := range o.Submitters {
		home := members[i%len(members)]
		cl := w.client(home, i%2 == 0, "")
		w.subWG.Add(1)
		go w.submitter(cl, per, o.QSShare)
	}
	return w
}

// StopSubmitters stops submitting and waits for every submit in flight to
// be answered (or to give up).
func (w *Workload) StopSubmitters() {
	w.stopSubmit()
	w.subWG.Wait()
}

// StopWorkers stops the workers (after the runs are final).
func (w *Workload) StopWorkers() {
	w.stopWork()
	w.workWG.Wait()
	for _, cl := range w.clients {
		cl.Close()
	}
}

func (w *Workload) submitter(cl *rpc.Client, rate, qsShare float64) {
	defer w.subWG.Done()
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for {
		select {
		case <-w.submitCtx.Done():
			return
		case <-tick.C:
		}
		w.submitOne(cl, qsShare)
	}
}

// submitOne submits one run and retries with the same id (the client id)
// until it is answered or 60 s pass.
func (w *Workload) submitOne(cl *rpc.Client, qsShare float64) {
	id := uuid.Must(uuid.NewV7()).String()
	queue := q1
	failFirst := false
	if rand.Float64() < qsShare {
		queue, failFirst = qs, rand.IntN(4) == 0
	}
	p := rpc.SubmitParams{Workflow: spec(queue, failFirst), ID: id, Labels: map[string]string{"cid": id}}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		start := time.Now()
		res, err := cl.RunSubmit(ctx, p)
		cancel()
		d := time.Since(start)
		w.rec.SubmitCalls.Add(1)
		if d >= 9500*time.Millisecond {
			w.rec.SlowSubmits.Add(1)
		}
		for {
			m := w.rec.MaxSubmit.Load()
			if int64(d) <= m || w.rec.MaxSubmit.CompareAndSwap(m, int64(d)) {
				break
			}
		}
		if err == nil {
			if !res.Created {
				w.rec.CreatedFalse.Add(1)
			}
			w.rec.mu.Lock()
			w.rec.Acked[id] = queue
			w.rec.mu.Unlock()
			return
		}
		w.rec.SubmitErrors.Add(1)
		if !waitOr(w.workCtx, 100*time.Millisecond) {
			return
		}
	}
	w.log.Warn("submit never answered", "id", id)
}

// waitOr waits d unless ctx ends first (false).
func waitOr(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (w *Workload) worker(id string, cl *rpc.Client, staller bool) {
	defer w.workWG.Done()
	queues, maxN, kind := []string{q1, qs}, 4, "worker"
	if staller {
		queues, maxN, kind = []string{qs}, 1, "staller"
	}
	for w.workCtx.Err() == nil {
		ctx, cancel := context.WithTimeout(w.workCtx, 15*time.Second)
		start := time.Now()
		tasks, err := cl.TaskClaim(ctx, rpc.ClaimParams{WorkerID: id, Queues: queues, Max: maxN, WaitMS: 1000})
		cancel()
		w.rec.ClaimCalls.Add(1)
		if err != nil {
			if w.workCtx.Err() == nil {
				w.rec.ClaimErrors.Add(1)
				w.rec.claimFailed(id, start, err)
				waitOr(w.workCtx, 100*time.Millisecond)
			}
			continue
		}
		var wg sync.WaitGroup
		for _, t := range tasks {
			w.rec.received(t.TaskID, t.FencingToken, kind)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if staller {
					w.stall(cl, t)
				} else {
					w.work(cl, id, t)
				}
			}()
		}
		wg.Wait()
	}
}

// work runs one claimed task: heartbeats while "working", then fails the
// first attempt of a fail_first task, otherwise completes it.
func (w *Workload) work(cl *rpc.Client, worker string, t rpc.Claimed) {
	hbCtx, stopHB := context.WithCancel(context.Background())
	lost := make(chan struct{})
	go func() {
		every := time.Duration(t.LeaseMS) * time.Millisecond / 4
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(hbCtx, every*2)
			res, err := cl.TaskHeartbeat(ctx, t.TaskID, t.FencingToken)
			cancel()
			if err == nil && !res.Accepted {
				w.rec.LeasesLost.Add(1)
				close(lost)
				return
			}
		}
	}()
	select { // the "work"
	case <-time.After(time.Duration(5+rand.IntN(40)) * time.Millisecond):
	case <-lost:
	}
	stopHB()
	var in struct {
		FailFirst bool `json:"fail_first"`
	}
	_ = json.Unmarshal(t.Input, &in)
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		var res *rpc.AckResult
		var err error
		if in.FailFirst && t.Attempt == 1 {
			_, err = cl.TaskFail(ctx, rpc.FailParams{TaskID: t.TaskID, FencingToken: t.FencingToken, Error: "deliberate first-attempt failure"})
			if err == nil {
				w.rec.Fails.Add(1)
			}
		} else {
			res, err = cl.TaskComplete(ctx, rpc.CompleteParams{TaskID: t.TaskID, FencingToken: t.FencingToken,
				Result: json.RawMessage(fmt.Sprintf(`{"by":%q}`, worker))})
			if err == nil {
				w.rec.Completes.Add(1)
				if res.Accepted {
					w.rec.mu.Lock()
					m := w.rec.Successes[t.TaskID]
					if m == nil {
						m = map[uint64]bool{}
						w.rec.Successes[t.TaskID] = m
					}
					m[t.FencingToken] = true
					w.rec.mu.Unlock()
				}
			}
		}
		cancel()
		if err == nil {
			return
		}
		if !waitOr(context.Background(), 100*time.Millisecond) {
			return
		}
	}
	w.log.Warn("completion never answered", "task", t.TaskID, "token", t.FencingToken)
}

// stall holds a claimed task without heartbeating until its lease is gone
// (the task was reaped or claimed again, as some agent shows it), then
// writes with the stale token: a heartbeat and a completion, both of which
// must be refused (accepted: false).
func (w *Workload) stall(cl *rpc.Client, t rpc.Claimed) {
	deadline := time.Now().Add(time.Duration(t.LeaseMS)*time.Millisecond + 30*time.Second)
	for {
		if time.Now().After(deadline) {
			w.rec.StallTimeouts.Add(1)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		cur, err := cl.TaskGet(ctx, t.TaskID)
		cancel()
		// A lagging agent may not have applied the claim yet (it shows an
		// older token and the task ready): only a token at least ours
		// proves the lease is gone (a later claim, or our lease reaped).
		if err == nil && (cur.FencingToken > t.FencingToken || cur.FencingToken == t.FencingToken && cur.State != "running") {
			break
		}
		waitOr(context.Background(), 200*time.Millisecond) // polling the replicated state
	}
	for _, write := range []string{"heartbeat", "complete"} {
		for try := 0; try < 50; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			var res *rpc.AckResult
			var err error
			if write == "heartbeat" {
				res, err = cl.TaskHeartbeat(ctx, t.TaskID, t.FencingToken)
			} else {
				res, err = cl.TaskComplete(ctx, rpc.CompleteParams{TaskID: t.TaskID, FencingToken: t.FencingToken, Result: json.RawMessage(`{"stale":true}`)})
			}
			cancel()
			if err != nil {
				if errors.Is(err, context.Canceled) {
					return
				}
				waitOr(context.Background(), 100*time.Millisecond)
				continue
			}
			w.rec.StaleWrites.Add(1)
			if res.Accepted {
				w.rec.mu.Lock()
				w.rec.StaleAccepted = append(w.rec.StaleAccepted, fmt.Sprintf("%s %s token %d", write, t.TaskID, t.FencingToken))
				w.rec.mu.Unlock()
				w.log.Error("stale-token write accepted", "write", write, "task", t.TaskID, "token", t.FencingToken)
			}
			break
		}
	}
}
