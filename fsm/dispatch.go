package fsm

import (
	"bytes"
	"slices"

	"github.com/flowd/flowd/fsm/domain"
)

// The ready index, leases and wake-ups: what makes a task dispatchable.
//
// A task is in the ready index iff it can be handed to a worker right now:
// a forward task in state ready of a running run, or a reverting task whose
// compensation is ready in a reverting run, and its queue is not paused for
// that run. Interrupting a run or pausing a queue for it takes its tasks out
// of the index; resuming puts them back. Global queue pauses, queue caps and
// open breakers are checked at claim time instead, since they affect every
// run at once.

// dispatchType is the handler type a worker needs for t's next claim.
func dispatchType(t *Task) string {
	if t.State == domain.TaskReverting {
		return t.RevertType
	}
	return t.Type
}

func (a *applier) dispatchable(r *Run, t *Task) bool {
	if slices.Contains(r.PausedQueues, t.Queue) {
		return false
	}
	switch {
	case t.State == domain.TaskReady:
		// A signal completes a wait task; a finally task also runs after
		// a revert (executing).
		return (r.State == domain.RunRunning || r.State == domain.RunReverting && a.executing(r)) && t.Type != domain.TypeWait &&
			!a.isSleep(t) && a.loopOf(r, t) == nil && !a.isRunTask(t)
	case t.State == domain.TaskReverting && t.Comp != nil && t.Comp.Phase == CompReady:
		return r.State == domain.RunReverting
	}
	return false
}

// makeReady stamps t's place in the FIFO and indexes it if dispatchable.
func (a *applier) makeReady(r *Run, t *Task) {
	t.ReadySeq = a.nextSeq()
	t.ReadyAt = a.now
	a.indexTask(r, t)
	a.armReady(t)
}

func (a *applier) readyKeyOf(t *Task) []byte {
	return readyKeyOf(t.Queue, dispatchType(t), t.Priority, t.ReadySeq, t)
}

// indexTask adds t to the ready index if it is dispatchable and not there yet.
func (a *applier) indexTask(r *Run, t *Task) {
	if t.Indexed || !a.dispatchable(r, t) {
		return
	}
	a.setFresh(a.readyKeyOf(t), []byte{})
	t.Indexed = true
	q := a.queue(t.Queue)
	q.Ready++
	if q.Types == nil {
		q.Types = map[string]int{}
	}
	q.Types[dispatchType(t)]++
}

// unindexTask removes t from the ready index if it is there.
func (a *applier) unindexTask(t *Task) {
	if !t.Indexed {
		return
	}
	a.delFresh(a.readyKeyOf(t))
	t.Indexed = false
	q := a.queue(t.Queue)
	q.Ready--
	typ := dispatchType(t)
	if q.Types[typ]--; q.Types[typ] <= 0 {
		delete(q.Types, typ)
	}
}

// wake schedules t to be looked at by Tick at due.
func (a *applier) wake(t *Task, due int64) {
	t.RetryAt = due
	a.setFresh(wakeKeyOf(due, t), []byte{})
}

func (a *applier) unwake(t *Task) {
	if t.RetryAt != 0 {
		a.delFresh(wakeKeyOf(t.RetryAt, t))
		t.RetryAt = 0
	}
}

// grantLease hands t to worker under token (this entry's index), for the
// claim request req (may be empty).
func (a *applier) grantLease(t *Task, worker, req string, comp bool, n int) {
	t.FencingToken = a.index
	t.LeaseOwner, t.LeaseRequest = worker, req
	if req != "" {
		a.setFresh(claimReqKeyOf(worker, req, t), []byte{})
	}
	t.LeaseExpiresAt = a.leaseEnd(t)
	t.Attempts = append(t.Attempts, Attempt{N: n, Worker: worker, Token: a.index, ClaimedAt: a.now,
		Outcome: OutcomeRunning, Compensation: comp})
	a.setFresh(leaseKeyOf(t.LeaseExpiresAt, t), []byte{})
	a.queue(t.Queue).Running++
}

// endedAttempt is an attempt endLease closed, for the task's next event.
type endedAttempt struct {
	task      *Task
	outcome   string
	claimedAt int64
}

// endLease releases t's lease and closes its current attempt.
func (a *applier) endLease(t *Task, outcome, errMsg string) {
	if t.LeaseExpiresAt != 0 {
		a.delFresh(leaseKeyOf(t.LeaseExpiresAt, t))
		if t.LeaseRequest != "" {
			a.delFresh(claimReqKeyOf(t.LeaseOwner, t.LeaseRequest, t))
		}
		a.queue(t.Queue).Running--
	}
	if n := len(t.Attempts); n > 0 && t.Attempts[n-1].Outcome == OutcomeRunning {
		at := &t.Attempts[n-1]
		at.EndedAt, at.Outcome, at.Error = a.now, outcome, errMsg
		a.sealLogs(t, at)
		if !at.Compensation {
			a.ended = endedAttempt{task: t, outcome: outcome, claimedAt: at.ClaimedAt}
		}
	}
	if b := a.storedBreaker(dispatchType(t)); b != nil && b.Trial != "" && t.isID(b.Trial) {
		b.Trial = ""
	}
	t.LeaseOwner, t.LeaseRequest, t.LeaseExpiresAt = "", "", 0
	t.TimeoutAt = 0
}

// extendLease moves t's lease expiry to now + lease.
func (a *applier) extendLease(t *Task) {
	a.delFresh(leaseKeyOf(t.LeaseExpiresAt, t))
	t.LeaseExpiresAt = a.leaseEnd(t)
	a.setFresh(leaseKeyOf(t.LeaseExpiresAt, t), []byte{})
}

// queueNames lists every queue the cluster has seen, in order.
func (a *applier) queueNames() []string {
	if a.queueNamesOK {
		return a.queueNamesMemo
	}
	var names []string
	must(a.tx.Scan(pfxQueue, nil, false, func(k, _ []byte) bool {
		names = append(names, string(k[len(pfxQueue):]))
		return true
	}))
	for _, k := range a.queues.order { // created in this entry
		n := k[len(pfxQueue):]
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	a.queueNamesMemo, a.queueNamesOK = names, true
	return names
}

// nextReady finds the best dispatchable task for a waiter: highest priority,
// then oldest ready, across its queues and types, skipping paused or full
// queues and types whose breaker is open.
func (a *applier) nextReady(w *Waiter) *Task {
	queues := w.Queues
	if len(queues) == 0 {
		queues = a.queueNames()
	}
	p := &a.pick
	p.found = false
	if a.pickFn == nil {
		a.pickFn = p.visit
	}
	for _, qn := range queues {
		// load, not a.queue: a claim must not create the queues it names.
		// A cached queue (every waiter after the first) builds no key.
		var q *QueueState
		if e, ok := a.queues.cached(pfxQueue, qn, "", ""); ok {
			q = live[QueueState](e)
		} else {
			q = load[QueueState](a, &a.queues, queueKey(qn))
		}
		if !q.Dispatching() {
			continue
		}
		if q.Limit != nil && q.Limit.Available(a.now) == 0 {
			a.throttle(qn)
			continue
		}
		types := w.Types
		if len(types) == 0 {
			for typ := range q.Types {
				types = append(types, typ)
			}
			slices.Sort(types)
		}
		for _, typ := range types {
			if q.Types[typ] == 0 || !a.breakerAllows(typ) {
				continue
			}
			if !q.limitAllows(typ, a.now) {
				a.throttle(qn)
				continue
			}
			// readyPrefix, in a buffer reused for every list (Scan keeps
			// neither its prefix nor its start).
			a.pfxBuf = append(append(append(a.pfxBuf[:0], pfxReady...), qn...), 0)
			a.pfxBuf = append(append(a.pfxBuf, typ...), 0)
			pfx := a.pfxBuf
			// Within one claim the heads taken so far are gone and nothing
			// becomes ready, so the scan resumes where the last one ended
			// instead of stepping over this entry's deletions again.
			p.pfxLen = len(pfx)
			var start []byte
			if cur := a.readyCursor[string(pfx)]; cur != nil {
				start = *cur
			}
			must(a.tx.Scan(pfx, start, false, a.pickFn))
		}
	}
	if !p.found {
		return nil
	}
	if a.readyCursor != nil {
		// A list's cursor buffer is reused (Scan does not keep its start):
		// a new one only for the claim's first pick from the list.
		list := p.key[:p.bestPfxLen]
		if cur := a.readyCursor[string(list)]; cur != nil {
			*cur = append((*cur)[:0], p.key...)
		} else {
			cur := bytes.Clone(p.key)
			a.readyCursor[string(list)] = &cur
		}
	}
	// The key ends with the task id "<run>/<key>": its record's key is
	// t/ and the id (taskKey), looked up in a reused buffer.
	a.keyBuf = append(append(a.keyBuf[:0], pfxTask...), p.key[p.bestPfxLen+12:]...)
	if e, ok := a.taskCache.get(a.keyBuf); ok {
		return live[Task](e)
	}
	return loadTemp[Task](a, &a.taskCache, a.keyBuf)
}

// readyPick is the best ready-list head a nextReady has seen: the lowest
// priority-and-order tail (12 bytes after the list's prefix), and its key.
type readyPick struct {
	pfxLen     int // the prefix of the list being scanned
	found      bool
	best       [12]byte
	key        []byte // the best head's key (a buffer reused across scans)
	bestPfxLen int    // its list's prefix length
}

// visit looks at a ready list's head (the scan's first key) and stops.
func (p *readyPick) visit(k, _ []byte) bool {
	tail := k[p.pfxLen:]
	if len(tail) > 12 && (!p.found || bytes.Compare(tail[:12], p.best[:]) < 0) {
		copy(p.best[:], tail[:12])
		p.key = append(p.key[:0], k...)
		p.bestPfxLen, p.found = p.pfxLen, true
	}
	return false
}
