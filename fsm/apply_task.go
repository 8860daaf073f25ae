package fsm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// Task commands: claim, heartbeat, complete, fail, reap, tick.

// MaxClaim bounds how many tasks one waiter receives from one claim.
const MaxClaim = 256

func (a *applier) applyClaim(c *Claim) any {
	a.readyCursor = map[string]*[]byte{}
	defer func() { a.readyCursor = nil }()
	a.throttled = nil
	defer a.countThrottled()
	res := &ClaimResult{Assigned: make([][]Claimed, len(c.Waiters))}
	for i := range c.Waiters {
		w := &c.Waiters[i]
		req := w.RequestID
		if !ValidClaimIDs(w.WorkerID, req) {
			req = "" // not idempotent (the daemon refuses such ids before this)
		}
		if req != "" {
			if again := a.claimedBy(w.WorkerID, req); len(again) > 0 {
				res.Assigned[i] = again // a re-sent claim: its leases, nothing more
				continue
			}
		}
		n := min(max(w.Max, 1), MaxClaim)
		for len(res.Assigned[i]) < n {
			t := a.nextReady(w)
			if t == nil {
				break
			}
			res.Assigned[i] = append(res.Assigned[i], a.claimTask(t, w.WorkerID, req))
		}
	}
	return res
}

// MaxClaimIDBytes bounds a worker id and a claim request id.
const MaxClaimIDBytes = 256

// ValidClaimIDs reports whether a worker id and a claim request id can key
// the claim-request index: bounded and without NUL (its separator).
func ValidClaimIDs(worker, req string) bool {
	return len(worker) <= MaxClaimIDBytes && len(req) <= MaxClaimIDBytes &&
		!strings.Contains(worker, "\x00") && !strings.Contains(req, "\x00")
}

// claimedBy returns the tasks still leased to the claim request (worker,
// req), as that claim answered them (same tokens), in task id order.
func (a *applier) claimedBy(worker, req string) []Claimed {
	prefix := claimReqPrefix(worker, req)
	if p, ok := a.tx.(store.PrefixProber); ok && !p.MayHavePrefix(prefix) {
		return nil // the usual case: a fresh request holds no leases
	}
	var ids []string
	must(a.tx.Scan(prefix, nil, false, func(k, _ []byte) bool {
		ids = append(ids, string(k[len(prefix):]))
		return true
	}))
	var out []Claimed
	for _, id := range ids {
		t, r, err := a.taskFor(id)
		if err != nil || !t.Leased() || t.LeaseOwner != worker || t.LeaseRequest != req {
			continue // the index and the records never disagree; be safe anyway
		}
		out = append(out, a.claimedView(t, r))
	}
	return out
}

func (a *applier) claimTask(t *Task, worker, req string) Claimed {
	r := a.loadRun(t.RunID)
	a.unindexTask(t)
	a.breakerPick(dispatchType(t), t)
	a.queue(t.Queue).takeToken(dispatchType(t), a.now)
	if t.State == domain.TaskReverting {
		t.Comp.Phase = CompRunning
		t.Comp.Attempt++
		a.grantLease(t, worker, req, true, t.Comp.Attempt)
		a.emit(Event{Kind: "compensation", RunID: t.RunID, TaskKey: t.Key, Transition: "claim",
			From: CompReady, To: CompRunning, Attempt: t.Comp.Attempt, Worker: worker, Queue: t.Queue, Type: t.RevertType})
	} else {
		t.Attempt++
		if t.StartedAt == 0 {
			t.StartedAt = a.now
		}
		if t.TimeoutMS > 0 {
			t.TimeoutAt = a.now + t.TimeoutMS // the lease never extends past it
		}
		a.grantLease(t, worker, req, false, t.Attempt)
		a.stepTask(r, t, domain.EdgeClaim, func(e *Event) { e.Worker = worker })
	}
	return a.claimedView(t, r)
}

// claimedView is what a worker is told about its lease of t.
func (a *applier) claimedView(t *Task, r *Run) Claimed {
	return claimedOf(t, r, func(key string) *Task { return a.loadTask(t.RunID, key) })
}

// claimedOf builds the Claimed of t's lease; dep loads a task of t's run.
func claimedOf(t *Task, r *Run, dep func(key string) *Task) Claimed {
	cl := Claimed{TaskID: t.ID(), RunID: t.RunID, TaskKey: t.Key, Queue: t.Queue, Input: t.Input,
		LeaseMS: t.LeaseMS, FencingToken: t.FencingToken, LeaseExpiresAt: t.LeaseExpiresAt}
	if r != nil {
		cl.RunInput = r.Input
	}
	if t.State == domain.TaskReverting {
		cl.Type, cl.Attempt, cl.Compensation, cl.Result = t.RevertType, t.Comp.Attempt, true, t.Result
	} else {
		cl.Type, cl.Attempt = t.Type, t.Attempt
		if t.TimeoutAt != 0 {
			cl.TimeoutMS, cl.DeadlineAt = t.TimeoutMS, t.TimeoutAt
		}
	}
	cl.DepResults = map[string]json.RawMessage{}
	for _, d := range t.Deps {
		if dt := dep(d); dt != nil && dt.Result != nil {
			cl.DepResults[d] = dt.Result
		}
	}
	return cl
}

// current reports whether token is t's live lease.
func current(t *Task, token uint64) bool { return t.Leased() && t.FencingToken == token }

// lastAttempt reports whether t's last attempt used token and ended with
// outcome: a retried request that already took effect.
func lastAttempt(t *Task, token uint64, outcome string) bool {
	n := len(t.Attempts)
	return n > 0 && t.Attempts[n-1].Token == token && t.Attempts[n-1].Outcome == outcome
}

func (a *applier) taskFor(id string) (*Task, *Run, error) {
	t := a.loadTaskByID(id)
	if t == nil {
		return nil, nil, fmt.Errorf("%w: task %s", ErrNotFound, id)
	}
	return t, a.loadRun(t.RunID), nil
}

func (a *applier) applyHeartbeat(c *Heartbeat) any {
	t, _, err := a.taskFor(c.TaskID)
	if err != nil {
		return err
	}
	if !current(t, c.Token) {
		return &AckResult{}
	}
	t.ack(a.now) // the worker has the claim: from now on an expiry counts
	if a.timedOut(t) {
		return &AckResult{}
	}
	a.appendLogs(t, c.Log)
	a.extendLease(t)
	return &AckResult{Accepted: true, LeaseExpiresAt: t.LeaseExpiresAt}
}

func (a *applier) applyComplete(c *Complete) any {
	if len(c.Result) > a.limits.MaxResultBytes {
		return fmt.Errorf("%w: result of %d bytes exceeds the limit of %d", ErrTooLarge, len(c.Result), a.limits.MaxResultBytes)
	}
	if c.Result != nil && !json.Valid(c.Result) {
		return fmt.Errorf("%w: result is not valid JSON", ErrInvalidArgument)
	}
	t, r, err := a.taskFor(c.TaskID)
	if err != nil {
		return err
	}
	if !current(t, c.Token) {
		return &AckResult{Accepted: lastAttempt(t, c.Token, OutcomeSucceeded)}
	}
	t.ack(a.now)
	if a.timedOut(t) {
		return &AckResult{} // too late: the attempt ended at its timeout
	}
	a.appendLogs(t, c.Log)
	if t.State == domain.TaskReverting {
		if len(c.Spawn) > 0 {
			return fmt.Errorf("%w: a compensation cannot spawn tasks", ErrInvalidArgument)
		}
		a.endLease(t, OutcomeSucceeded, "")
		a.breakerSuccess(t.RevertType)
		a.emit(Event{Kind: "compensation", RunID: t.RunID, TaskKey: t.Key, Transition: "succeed",
			From: CompRunning, Attempt: t.Comp.Attempt, Queue: t.Queue, Type: t.RevertType})
		t.Comp = nil
		a.stepTask(r, t, domain.EdgeReverted, nil)
		a.advanceRevert(r)
		a.derive(r)
		return &AckResult{Accepted: true}
	}
	a.endLease(t, OutcomeSucceeded, "")
	t.Result, t.Error, t.FinishedAt = c.Result, "", a.now
	a.stepTask(r, t, domain.EdgeSucceed, nil)
	a.breakerSuccess(t.Type)
	a.getCounters().TasksDone++
	if len(c.Spawn) > 0 {
		if a.isFinally(r, t) {
			return fmt.Errorf("%w: a finally task cannot spawn tasks", ErrInvalidArgument)
		}
		if err := a.spawn(r, t, c.Spawn); err != nil {
			return err // the whole entry is dropped: the completion too
		}
	}
	if a.executing(r) {
		a.elementSettled(r, t)
		for _, d := range t.Dependents {
			a.advance(r, a.loadTask(r.ID, d))
		}
	}
	a.derive(r)
	return &AckResult{Accepted: true}
}

// spawn adds children to r in the entry that completes parent. Children
// depend on parent (so they see its result), and every task that depended
// on parent now also waits for all the children.
func (a *applier) spawn(r *Run, parent *Task, children []domain.TaskSpec) error {
	have := r.Tasks()
	if have+len(children) > a.limits.MaxRunTasks {
		return fmt.Errorf("%w: spawning %d tasks would give the run %d tasks (limit %d)",
			ErrTooLarge, len(children), have+len(children), a.limits.MaxRunTasks)
	}
	if !a.atLeast(V2) { // as a release before V2 decodes them (apply_decide.go, versioned)
		children = slices.Clone(children)
		for i := range children {
			children[i] = children[i].StripV2()
		}
	}
	existing := map[string]bool{}
	for _, t := range a.runTasks(r.ID) {
		existing[t.Key] = true
	}
	if err := domain.ValidateSpawn(children, existing, a.limits); err != nil {
		return err
	}
	keys := make([]string, len(children))
	for i, ch := range children {
		keys[i] = ch.Key
	}
	siblingDependents := map[string][]string{}
	for _, ch := range children {
		for _, d := range ch.Deps {
			siblingDependents[d] = append(siblingDependents[d], ch.Key)
		}
	}
	// Children depending on existing tasks other than parent must be
	// promoted by them and reverted before them.
	for _, ch := range children {
		for _, d := range ch.Deps {
			if existing[d] {
				dt := a.loadTask(r.ID, d)
				dt.Dependents = append(dt.Dependents, ch.Key)
			}
		}
	}
	oldDependents := parent.Dependents
	for _, d := range oldDependents {
		dt := a.loadTask(r.ID, d)
		dt.Deps = append(dt.Deps, keys...)
	}
	parent.Dependents = append(append([]string(nil), oldDependents...), keys...)
	var created []*Task
	for i, raw := range children {
		ch := raw.NormalizeWith(a.getSettings().DefaultMaxAttempts)
		deps := append([]string{parent.Key}, ch.Deps...)
		t := &Task{
			RunID: r.ID, Key: ch.Key, Seq: have + i, Type: ch.Type, Queue: ch.Queue, Input: ch.Input,
			Deps: deps, Dependents: append(append([]string(nil), oldDependents...), siblingDependents[ch.Key]...),
			Priority: ch.Priority, LeaseMS: ch.LeaseMS, Retry: *ch.Retry, RevertType: ch.RevertType,
			TimeoutMS: ch.TimeoutMS, ScheduleToStartMS: ch.ScheduleToStartMS, Signal: ch.Signal,
			ScheduleToStartPolicy: ch.ScheduleToStartPolicy, SpawnedBy: parent.Key, State: domain.TaskPending, CreateIndex: a.index,
		}
		a.newTask(t)
		r.Counts[domain.TaskPending]++
		created = append(created, t)
		a.emit(Event{Kind: "task", RunID: r.ID, TaskKey: t.Key, Transition: "spawned", To: string(t.State),
			Queue: t.Queue, Type: t.Type})
	}
	if r.State == domain.RunRunning || r.State == domain.RunInterrupted {
		for _, t := range created {
			a.advance(r, t)
		}
	} else {
		// A task of a failed run finished late: its children can never run.
		for _, t := range created {
			a.cancelWaiting(r, t, "run "+string(r.State))
		}
	}
	return nil
}

func (a *applier) applyFail(c *Fail) any {
	if len(c.Error) > a.limits.MaxResultBytes {
		c.Error = c.Error[:a.limits.MaxResultBytes]
	}
	t, r, err := a.taskFor(c.TaskID)
	if err != nil {
		return err
	}
	if !current(t, c.Token) {
		return &AckResult{Accepted: lastAttempt(t, c.Token, OutcomeFailed)}
	}
	t.ack(a.now)
	if a.timedOut(t) {
		return &AckResult{}
	}
	a.appendLogs(t, c.Log)
	retryable := c.Retryable == nil || *c.Retryable
	a.endLease(t, OutcomeFailed, c.Error)
	a.failAttempt(r, t, c.Error, retryable)
	return &AckResult{Accepted: true}
}

// failAttempt handles an attempt that ended badly (an error reported by the
// worker, or a lease that expired): retry if attempts remain, otherwise the
// task fails for good.
func (a *applier) failAttempt(r *Run, t *Task, msg string, retryable bool) {
	if t.State == domain.TaskReverting {
		a.breakerFailure(t.RevertType)
		a.failCompensation(r, t, msg, retryable)
		a.derive(r)
		return
	}
	a.breakerFailure(t.Type)
	t.Error = msg
	if t.State == domain.TaskRunning {
		a.stepTask(r, t, domain.EdgeFail, func(e *Event) { e.Error = msg })
	}
	if retryable && a.canRetry(r, t) {
		a.stepTask(r, t, domain.EdgeScheduleRetry, nil)
		a.wake(t, a.now+domain.Backoff(t.Retry, t.ID(), t.Attempt))
		return
	}
	t.FinishedAt = a.now
	a.settled(r, t)
	a.derive(r)
}

func (a *applier) applyReap(c *Reap) any {
	limit := c.Limit
	if limit <= 0 {
		limit = 1000
	}
	var due []string
	more := false
	must(a.tx.Scan(pfxLease, nil, false, func(k, _ []byte) bool {
		if int64(getU64(k[len(pfxLease):len(pfxLease)+8])^(1<<63)) > a.now {
			return false
		}
		if len(due) == limit {
			more = true
			return false
		}
		due = append(due, string(k[len(pfxLease)+8:]))
		return true
	}))
	for _, id := range due {
		t := a.loadTaskByID(id)
		if t == nil || !t.Leased() || t.LeaseExpiresAt > a.now {
			continue
		}
		r := a.loadRun(t.RunID)
		worker := t.LeaseOwner
		if a.timedOut(t) {
			continue
		}
		a.getCounters().LeaseExpiries++
		acked := t.acked()
		if !acked && a.freeExpiry(r, t) {
			a.getCounters().LeaseUnacked++
			a.returnUnacked(r, t, worker)
			continue
		}
		n := t.Attempt
		if t.State == domain.TaskReverting {
			n = t.Comp.Attempt
		}
		why := "worker " + worker + " stopped heartbeating"
		if !acked {
			why = "worker " + worker + " never acknowledged the claim (after " + itoa(domain.MaxUnackedExpiries) + " such expiries they count)"
		}
		a.endLease(t, OutcomeLeaseExpired, "lease expired: "+why)
		// Retried like a failed attempt: with the task's backoff.
		a.failAttempt(r, t, "lease expired on attempt "+itoa(n)+" ("+why+")", true)
	}
	return &CountResult{Count: len(due), More: more}
}

// freeExpiry reports whether an unacknowledged expiry of t's lease may go
// uncounted: t has free expiries left and its run still wants the attempt
// (a straggler of a failed run fails as before).
func (a *applier) freeExpiry(r *Run, t *Task) bool {
	if t.State == domain.TaskReverting {
		return t.Comp != nil && t.Comp.Unacked < domain.MaxUnackedExpiries
	}
	return t.State == domain.TaskRunning && t.Unacked < domain.MaxUnackedExpiries && a.executing(r)
}

// returnUnacked ends a lease its worker never acknowledged without spending
// the attempt: the attempt is recorded (outcome lease_unacked), the attempt
// count goes back, and the task (or its compensation) is ready again at
// once, at the back of its line, with no backoff and no breaker failure.
func (a *applier) returnUnacked(r *Run, t *Task, worker string) {
	if t.State == domain.TaskReverting {
		t.Comp.Unacked++
		a.endLease(t, OutcomeLeaseUnacked, "lease expired before worker "+worker+" acknowledged the claim; not counted ("+
			itoa(t.Comp.Unacked)+" of "+itoa(domain.MaxUnackedExpiries)+" free)")
		n := t.Comp.Attempt
		t.Comp.Attempt--
		t.Comp.Phase = CompReady
		a.emit(Event{Kind: "compensation", RunID: t.RunID, TaskKey: t.Key, Transition: domain.EdgeReapLease,
			From: CompRunning, To: CompReady, Attempt: n, Worker: worker, Queue: t.Queue, Type: t.RevertType,
			Error: OutcomeLeaseUnacked})
		a.makeReady(r, t)
		return
	}
	t.Unacked++
	a.endLease(t, OutcomeLeaseUnacked, "lease expired before worker "+worker+" acknowledged the claim; not counted ("+
		itoa(t.Unacked)+" of "+itoa(domain.MaxUnackedExpiries)+" free)")
	n := t.Attempt
	t.Attempt--
	if t.Attempt == 0 {
		t.StartedAt = 0 // no attempt has counted: the next claim starts it
	}
	a.stepTask(r, t, domain.EdgeReapLease, func(e *Event) { e.Worker, e.Attempt, e.Error = worker, n, OutcomeLeaseUnacked })
	a.makeReady(r, t)
}

func (a *applier) applyTick(c *Tick) any {
	limit := c.Limit
	if limit <= 0 {
		limit = 1000
	}
	var due [][]byte
	more := false
	must(a.tx.Scan(pfxWake, nil, false, func(k, _ []byte) bool {
		if int64(getU64(k[len(pfxWake):len(pfxWake)+8])^(1<<63)) > a.now {
			return false
		}
		if len(due) == limit {
			more = true
			return false
		}
		due = append(due, append([]byte(nil), k...))
		return true
	}))
	n := 0
	for _, k := range due {
		a.del(k)
		id, at := string(k[len(pfxWake)+8:]), int64(getU64(k[len(pfxWake):len(pfxWake)+8])^(1<<63))
		if !strings.Contains(id, "/") {
			n += a.fireRun(id, at)
			continue
		}
		t := a.loadTaskByID(id)
		if t == nil {
			continue
		}
		r := a.loadRun(t.RunID)
		switch {
		case t.DueAt != 0 && t.DueAt == at:
			n += a.fireReady(r, t)
		case t.State == domain.TaskRetrying && t.RetryAt <= a.now:
			t.RetryAt = 0
			a.stepTask(r, t, domain.EdgeRetryReady, nil)
			a.makeReady(r, t)
			n++
		case t.State == domain.TaskReverting && t.Comp != nil && t.Comp.Phase == CompRetrying && t.Comp.RetryAt <= a.now:
			t.Comp.Phase, t.Comp.RetryAt, t.RetryAt = CompReady, 0, 0
			a.emit(Event{Kind: "compensation", RunID: t.RunID, TaskKey: t.Key, Transition: "retry_ready",
				From: CompRetrying, To: CompReady, Attempt: t.Comp.Attempt, Queue: t.Queue, Type: t.RevertType})
			a.makeReady(r, t)
			n++
		}
	}
	n += a.tickBreakers()
	return &CountResult{Count: n, More: more}
}

// canRetry reports whether t has attempts left and its run still wants it.
// After a run.retry, the attempts before it do not count (apply_retry.go).
func (a *applier) canRetry(r *Run, t *Task) bool {
	return t.Attempt-a.attemptBase(r, t) < t.Retry.MaxAttempts && a.executing(r)
}

func itoa(n int) string { return strconv.Itoa(n) }
