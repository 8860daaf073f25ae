// Package worker is flowd's Go worker SDK: register trusted in-process
// handlers by task type and Run; the worker long-polls claims up to its free
// slots, heartbeats each lease, and reports results with the fencing token.
//
// Safety rules the SDK enforces:
//   - Nothing in a task message is ever loaded or executed as code: a task
//     only selects a handler the program registered.
//   - A task of an unregistered type is failed, non-retryable, naming the
//     type and the registered ones.
//   - When a heartbeat comes back accepted=false the lease is lost (the
//     task was reaped, cancelled or reverted): the handler's context is
//     cancelled and its eventual result is discarded, never sent as current.
//   - A handler panic fails the task with the panic message; the worker
//     lives on.
//   - Results are acknowledged only after the cluster durably recorded them.
//
// A handler's log lines (Task.Log, Logf, Logger, LogWriter) ride on the
// task's heartbeats and its outcome and are kept per attempt (logs.go).
//
// See docs/workers.md.
package worker

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Handler runs one task. Its result is marshalled to JSON (a
// json.RawMessage is sent as is). Returning an error fails the attempt;
// wrap it with Permanent to stop retries. ctx is cancelled when the lease is
// lost or the worker stops hard.
type Handler func(ctx context.Context, t *Task) (any, error)

// Task is a claimed task as a handler sees it.
type Task struct {
	ID           string
	RunID        string
	Key          string
	Type         string
	Queue        string
	Input        json.RawMessage
	RunInput     json.RawMessage
	DepResults   map[string]json.RawMessage
	Attempt      int
	FencingToken uint64
	LeaseExpires time.Time
	// Deadline is when the attempt times out (the task's timeout_ms after
	// the worker received it; zero: none). The handler's context is
	// cancelled then, with cause ErrTimeout.
	Deadline time.Time
	// Compensation is set when this is a revert handler call; Result is
	// then the task's recorded result (what to undo).
	Compensation bool
	Result       json.RawMessage

	mu    sync.Mutex
	spawn []json.RawMessage
	log   taskLog
}

// IdempotencyKey identifies this attempt (run, task, attempt, and "revert"
// for a compensation) for side effects that must not repeat.
func (t *Task) IdempotencyKey() string {
	k := fmt.Sprintf("%s/%s/%d", t.RunID, t.Key, t.Attempt)
	if t.Compensation {
		k += "/revert"
	}
	return k
}

// Decode unmarshals the task input into v.
func (t *Task) Decode(v any) error {
	if len(t.Input) == 0 {
		return nil
	}
	return json.Unmarshal(t.Input, v)
}

// Spawn adds children to the run when this task completes successfully
// (dynamic fan-out). Tasks that depended on this one wait for them all.
func (t *Task) Spawn(children ...domain.TaskSpec) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range children {
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		t.spawn = append(t.spawn, b)
	}
	return nil
}

// PermanentError marks a failure that must not be retried.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so the task fails without further attempts.
func Permanent(err error) error { return &PermanentError{Err: err} }

// ErrLeaseLost is the cause of a handler's context cancellation when the
// worker lost the task's lease.
var ErrLeaseLost = errors.New("lease lost: the task was reaped, cancelled or reverted; its result will be discarded")

// ErrTimeout is the cause of a handler's context cancellation when the
// attempt ran past the task's timeout_ms: the cluster fails the attempt
// (and retries it by its policy); the handler's result is discarded.
var ErrTimeout = errors.New("task timeout: the attempt ran past the task's timeout_ms; its result will be discarded")

// Options configure a Worker.
type Options struct {
	// ID names the worker in leases and attempt history (default
	// hostname-pid).
	ID string
	// Queues to claim from (default: every queue).
	Queues []string
	// Concurrency is the number of task slots (default 4).
	Concurrency int
	// ClaimWait is how long one long-poll claim waits (default 20s).
	ClaimWait time.Duration
	// DrainTimeout bounds a graceful drain (default 30s).
	DrainTimeout time.Duration
	// MaxBackoff caps reconnect backoff (default 30s).
	MaxBackoff time.Duration
	// AckAfter is when a running task's first heartbeat goes out after its
	// claim (default 1s, never later than the lease's heartbeat interval;
	// negative: at once). That heartbeat acknowledges the claim: a lease
	// that expires unacknowledged does not spend an attempt (its claim
	// reply may have been lost), one that was acknowledged does. A handler
	// that finishes first acknowledges with its completion or failure, so
	// short tasks cost no heartbeat at all.
	AckAfter time.Duration
	// AnyType makes a catch-all worker: it claims tasks of every type in
	// its queues, and fails (non-retryably) those it has no handler for.
	// By default a worker claims only the types it registered.
	AnyType bool
	// NoClaimOnComplete turns off claiming the next task with each
	// completion (task.complete with claim): the worker then claims only
	// by long polls, one raft entry more per task.
	NoClaimOnComplete bool
	// Route is rpc.ClientOptions.Route: by default (rpc.RouteLeader) claims,
	// heartbeats and reports go straight to the leader's endpoint when it is
	// among the endpoints; rpc.RouteAny sends them to whichever agent the
	// worker is connected to, which forwards them.
	Route string
	// LogFlush is how soon a heartbeat carries a task's logged lines to
	// the cluster (default 1s; lines also ride on the completion).
	LogFlush time.Duration
	// Token is an ACL token's secret (`flowd acl token create --role
	// worker`), sent first on every connection to a tcp:// or tls://
	// endpoint (rpc.ClientOptions.Token); the Unix socket needs none.
	Token string
	// TLS verifies a tls:// endpoint's agent (rpc.ClientOptions.TLS); nil
	// with CACert set: rpc.ClientTLSConfig(CACert).
	TLS *tls.Config
	// CACert is the cluster CA's PEM file (ca.pem) when TLS is nil.
	CACert string
	Logger *slog.Logger
}

// claimGrace is how long a claim may outlive the worker's stop or its own
// wait: the agent's answer to a half-close, or a slow network.
const claimGrace = 5 * time.Second

// Worker runs registered handlers for claimed tasks.
type Worker struct {
	c *rpc.Client // heartbeats and reports
	// claims carries only the long-poll claims, on a connection of its own:
	// closing it when the worker drains tells the agent to stop holding the
	// claim (otherwise it could lease a task to a worker that stopped
	// claiming, and the task would wait for its lease to expire).
	claims   *rpc.Client
	opts     Options
	log      *slog.Logger
	mu       sync.Mutex
	handlers map[string]Handler
	inflight sync.WaitGroup
	slots    chan struct{}
	// stopping is set when Run's context ends: from then on no completion
	// claims a next task.
	stopping atomic.Bool
	// claiming is closed when Run stops claiming: its last long poll has
	// been answered.
	claiming chan struct{}
	claimEnd sync.Once

	// hard is cancelled for an immediate stop: handler contexts derive
	// from it, not from Run's ctx, so a drain lets them finish.
	hard       context.Context
	hardCancel context.CancelCauseFunc
}

// New returns a worker calling the cluster at the given endpoints
// ("unix:///path.sock", "tcp://host:port"; comma-separated lists work too).
func New(endpoints []string, opts Options) (*Worker, error) {
	var eps []string
	for _, e := range endpoints {
		for _, p := range strings.Split(e, ",") {
			if p = strings.TrimSpace(p); p != "" {
				eps = append(eps, p)
			}
		}
	}
	if len(eps) == 0 {
		return nil, errors.New("no endpoint: pass --addr or set FLOWD_ADDR (e.g. unix:///tmp/flowd/n1.sock)")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ID == "" {
		host, _ := os.Hostname()
		opts.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.ClaimWait <= 0 {
		opts.ClaimWait = 20 * time.Second
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 30 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.LogFlush <= 0 {
		opts.LogFlush = DefaultLogFlush
	}
	// Both clients are leader-aware: each keeps its own connection to the
	// leader's endpoint, so a claim waits on a connection of its own there.
	if opts.TLS == nil && opts.CACert != "" {
		cfg, err := rpc.ClientTLSConfig(opts.CACert)
		if err != nil {
			return nil, err
		}
		opts.TLS = cfg
	}
	copts := rpc.ClientOptions{BackoffCap: opts.MaxBackoff, MaxAttempts: 1000, Route: opts.Route, Logger: opts.Logger,
		Token: opts.Token, TLS: opts.TLS}
	c, err := rpc.NewClient(eps, copts)
	if err != nil {
		return nil, err
	}
	claims, err := rpc.NewClient(eps, copts)
	if err != nil {
		c.Close()
		return nil, err
	}
	hard, cancel := context.WithCancelCause(context.Background())
	return &Worker{c: c, claims: claims, opts: opts, log: opts.Logger.With("worker", opts.ID), handlers: map[string]Handler{},
		slots: make(chan struct{}, opts.Concurrency), claiming: make(chan struct{}), hard: hard, hardCancel: cancel}, nil
}

// ID returns the worker id.
func (w *Worker) ID() string { return w.opts.ID }

// Client returns the worker's protocol client.
func (w *Worker) Client() *rpc.Client { return w.c }

// Register adds a trusted handler for a task type. Compensation handlers
// are registered under the task's revert_type the same way.
func (w *Worker) Register(typ string, h Handler) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handlers[typ] = h
}

func (w *Worker) types() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.handlers))
	for t := range w.handlers {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

func (w *Worker) handler(typ string) Handler {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.handlers[typ]
}

// Run claims and runs tasks until ctx is done, then drains: it stops
// claiming, lets in-flight handlers finish (up to DrainTimeout) and reports
// their results, and returns nil. Stop cancels in-flight handlers at once.
func (w *Worker) Run(ctx context.Context) error {
	if len(w.types()) == 0 {
		return errors.New("no handlers registered")
	}
	if err := w.hello(ctx); err != nil {
		return err
	}
	w.log.Info("worker started", "types", w.types(), "queues", w.opts.Queues, "concurrency", w.opts.Concurrency)
	// Stopping half-closes the claim connection: the agent ends the long
	// poll at once and answers with whatever it leased in that instant,
	// and those tasks run as part of the drain (a claim abandoned with the
	// context would lease them to nobody until their leases expired).
	stop := context.AfterFunc(ctx, func() {
		w.stopping.Store(true)
		w.claims.CloseWrite()
	})
	defer stop()
	attempt := 0
	for ctx.Err() == nil {
		free := w.waitSlot(ctx)
		if free == 0 {
			break
		}
		types := w.types()
		if w.opts.AnyType {
			types = nil
		}
		// The claim outlives ctx by at most claimGrace: time for the agent
		// to answer the half-close (or for a retry against an agent that
		// is down to give up).
		cctx, cancel := context.WithTimeout(w.hard, w.opts.ClaimWait+claimGrace)
		late := context.AfterFunc(ctx, func() { time.AfterFunc(claimGrace, cancel) })
		tasks, err := w.claims.TaskClaim(cctx, rpc.ClaimParams{WorkerID: w.opts.ID, Queues: w.opts.Queues, Types: types,
			Max: free, WaitMS: w.opts.ClaimWait.Milliseconds(), Slots: w.opts.Concurrency})
		late()
		cancel()
		w.releaseReserved(free - len(tasks))
		if err != nil {
			if ctx.Err() != nil || w.hard.Err() != nil {
				break
			}
			attempt++
			d := w.backoff(attempt, err)
			w.log.Warn("claim failed; retrying", "err", err, "in", d.Round(time.Millisecond))
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
			continue
		}
		attempt = 0
		for _, c := range tasks {
			w.inflight.Add(1)
			go w.run(c)
		}
	}
	w.claimEnd.Do(func() { close(w.claiming) })
	return w.drain()
}

// waitSlot reserves every free slot (at least one) and returns how many.
func (w *Worker) waitSlot(ctx context.Context) int {
	select {
	case w.slots <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	n := 1
	for n < cap(w.slots) {
		select {
		case w.slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

func (w *Worker) releaseReserved(n int) {
	for i := 0; i < n; i++ {
		<-w.slots
	}
}

// backoff is exponential with full jitter from 100 ms, capped at
// MaxBackoff, and honours an agent's retry_after_ms.
func (w *Worker) backoff(attempt int, err error) time.Duration {
	return rpc.Backoff(attempt, 100*time.Millisecond, w.opts.MaxBackoff, err)
}

func (w *Worker) hello(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		_, err := w.c.Hello(ctx, "flowd-worker-go")
		if err == nil {
			return nil
		}
		if !errors.Is(err, domain.ErrUnavailable) {
			return fmt.Errorf("connect: %w", err) // e.g. a protocol mismatch: fail fast
		}
		d := w.backoff(attempt, err)
		w.log.Warn("cannot reach the cluster; retrying", "err", err, "in", d.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

// drain waits for in-flight tasks up to DrainTimeout, then stops hard.
func (w *Worker) drain() error {
	_ = w.claims.Close() // the agent stops holding our claim
	done := make(chan struct{})
	go func() { w.inflight.Wait(); close(done) }()
	select {
	case <-done:
		w.log.Info("drained; all in-flight tasks reported")
	case <-time.After(w.opts.DrainTimeout):
		w.log.Warn("drain timed out; abandoning in-flight tasks (their leases will expire and they will be retried)")
		w.Stop()
		<-done
	case <-w.hard.Done():
		<-done
	}
	return w.c.Close()
}

// Stop cancels every in-flight handler at once (a second signal). Their
// leases expire and the tasks are retried elsewhere.
func (w *Worker) Stop() { w.hardCancel(errors.New("worker stopped")) }

// run executes c and, while the worker is not stopping, the next task
// each completion claimed for this slot (task.complete with a claim: one
// raft entry for a result and the next lease).
func (w *Worker) run(c rpc.Claimed) {
	defer w.inflight.Done()
	defer func() { <-w.slots }()
	for next := &c; next != nil; {
		next = w.execute(*next)
	}
}

// nextClaim is the claim a completion carries: one more task of the kinds
// this worker serves, unless it is stopping.
func (w *Worker) nextClaim() *rpc.ClaimParams {
	if w.stopping.Load() || w.opts.NoClaimOnComplete {
		return nil
	}
	types := w.types()
	if w.opts.AnyType {
		types = nil
	}
	return &rpc.ClaimParams{WorkerID: w.opts.ID, Queues: w.opts.Queues, Types: types, Max: 1, Slots: w.opts.Concurrency}
}

// execute runs one task and reports its outcome; it returns the task the
// completion claimed next, if any.
func (w *Worker) execute(c rpc.Claimed) *rpc.Claimed {
	t := &Task{ID: c.TaskID, RunID: c.RunID, Key: c.TaskKey, Type: c.Type, Queue: c.Queue, Input: c.Input,
		RunInput: c.RunInput, DepResults: c.DepResults, Attempt: c.Attempt, FencingToken: c.FencingToken,
		LeaseExpires: c.LeaseExpiresAt, Compensation: c.Compensation, Result: c.Result}
	t.log.wake = make(chan struct{}, 1)
	log := w.log.With("task", t.ID, "type", t.Type, "attempt", t.Attempt)
	h := w.handler(t.Type)
	if h == nil {
		no := false
		msg := fmt.Sprintf("no handler for task type %q on worker %s (registered: %s)", t.Type, w.opts.ID, strings.Join(w.types(), ", "))
		w.report(log, func(ctx context.Context) (*rpc.AckResult, error) {
			return w.c.TaskFail(ctx, rpc.FailParams{TaskID: t.ID, FencingToken: t.FencingToken, Error: msg, Retryable: &no})
		})
		return nil
	}
	ctx, cancel := context.WithCancelCause(w.hard)
	defer cancel(nil)
	timedOut := make(chan struct{})
	if c.TimeoutMS > 0 {
		// Counted from receipt, so the handler stops no earlier than the
		// cluster's deadline minus the claim's transit (never before it
		// started).
		d := time.Duration(c.TimeoutMS) * time.Millisecond
		t.Deadline = time.Now().Add(d)
		tm := time.AfterFunc(d, func() { close(timedOut); cancel(ErrTimeout) })
		defer tm.Stop()
	}
	lost := make(chan struct{})
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		w.heartbeat(ctx, t, c.LeaseMS, func() { close(lost); cancel(ErrLeaseLost) })
	}()
	result, err := call(ctx, h, t)
	cancel(nil)
	<-hbDone
	t.log.flushWriters()
	logs, _ := t.log.take() // the rest of the log rides on the outcome
	select {
	case <-timedOut:
		log.Warn("task ran past its timeout_ms; result discarded (the cluster fails the attempt)")
		return nil
	case <-lost:
		log.Warn("lease lost while running; result discarded")
		return nil
	default:
	}
	if w.hard.Err() != nil {
		log.Warn("worker stopped hard; task abandoned (its lease will expire)")
		return nil
	}
	if err != nil {
		retryable := !errors.As(err, new(*PermanentError))
		log.Info("task failed", "err", err, "retryable", retryable)
		w.report(log, func(ctx context.Context) (*rpc.AckResult, error) {
			return w.c.TaskFail(ctx, rpc.FailParams{TaskID: t.ID, FencingToken: t.FencingToken, Error: err.Error(), Retryable: &retryable, LogParams: logs})
		})
		return nil
	}
	raw, merr := marshalResult(result)
	if merr != nil {
		no := false
		w.report(log, func(ctx context.Context) (*rpc.AckResult, error) {
			return w.c.TaskFail(ctx, rpc.FailParams{TaskID: t.ID, FencingToken: t.FencingToken, Error: "result is not JSON: " + merr.Error(), Retryable: &no, LogParams: logs})
		})
		return nil
	}
	t.mu.Lock()
	spawn := slices.Clone(t.spawn)
	t.mu.Unlock()
	done := rpc.CompleteParams{TaskID: t.ID, FencingToken: t.FencingToken, Result: raw, Spawn: spawn, LogParams: logs}
	if next := w.nextClaim(); next != nil {
		withNext := done
		withNext.Claim = next
		ctx, cancel := context.WithTimeout(w.hard, 15*time.Second)
		ack, err := w.c.TaskCompleteAndClaim(ctx, withNext)
		cancel()
		if err == nil {
			if !ack.Accepted {
				log.Warn("result rejected: the lease was lost (stale fencing token)")
			}
			if len(ack.Tasks) > 0 {
				// Max 1: exactly this slot's next task. Should an agent
				// answer more, the rest are not run here; their leases
				// expire unacknowledged, which spends no attempt.
				return &ack.Tasks[0]
			}
			return nil
		}
		if w.hard.Err() != nil {
			return nil
		}
		// Outcome unknown: report the completion again without a claim
		// (repeat-safe by its fencing token).
		log.Debug("complete-and-claim failed; reporting the result alone", "err", err)
	}
	w.report(log, func(ctx context.Context) (*rpc.AckResult, error) {
		return w.c.TaskComplete(ctx, done)
	})
	return nil
}

func marshalResult(v any) (json.RawMessage, error) {
	switch r := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if !json.Valid(r) {
			return nil, errors.New("invalid JSON")
		}
		return r, nil
	}
	return json.Marshal(v)
}

// call runs the handler, turning a panic into an error.
func call(ctx context.Context, h Handler, t *Task) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v\n%s", r, firstLines(string(debug.Stack()), 12))
		}
	}()
	return h(ctx, t)
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// DefaultAckAfter is Options.AckAfter's default.
const DefaultAckAfter = time.Second

// heartbeat acknowledges the claim after AckAfter (at most lease/3), then
// extends the lease every lease/3 until ctx ends; onLost is called once if
// the cluster says the lease is gone.
func (w *Worker) heartbeat(ctx context.Context, t *Task, leaseMS int64, onLost func()) {
	every := time.Duration(max(leaseMS, 300)) * time.Millisecond / 3
	first := min(w.opts.AckAfter, every)
	if w.opts.AckAfter == 0 {
		first = min(DefaultAckAfter, every)
	}
	if !t.Deadline.IsZero() {
		// A timeout of an attempt its worker never acknowledged is a fault
		// and spends nothing: acknowledge well before the timeout, so a
		// handler that runs past it is charged an attempt.
		first = min(first, time.Until(t.Deadline)/3)
	}
	tick := time.NewTimer(max(first, 0))
	defer tick.Stop()
	// Logged lines go out with a heartbeat at most LogFlush after the
	// first of them waits (each such heartbeat also extends the lease).
	var flush <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.log.wake:
			if flush == nil {
				flush = time.After(w.opts.LogFlush)
			}
			continue
		case <-flush:
			flush = nil
		case <-tick.C:
			tick.Reset(every)
		}
		if w.sendHeartbeat(ctx, t, every) {
			onLost()
			return
		}
	}
}

// report sends a completion or failure, retrying through failovers until
// the cluster answers (accepted or rejected) or the worker stops hard.
func (w *Worker) report(log *slog.Logger, send func(context.Context) (*rpc.AckResult, error)) {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(w.hard, 15*time.Second)
		ack, err := send(ctx)
		cancel()
		if err == nil {
			if !ack.Accepted {
				log.Warn("result rejected: the lease was lost (stale fencing token)")
			}
			return
		}
		if w.hard.Err() != nil || !errors.Is(err, domain.ErrUnavailable) {
			log.Error("could not report the result", "err", err)
			return
		}
		d := w.backoff(attempt, err)
		select {
		case <-w.hard.Done():
			return
		case <-time.After(d):
		}
	}
}
