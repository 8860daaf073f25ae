package fsm

import (
	"fmt"

	"github.com/flowd/flowd/fsm/domain"
)

// Time limits: a task attempt's timeout_ms, a ready task's
// schedule_to_start_ms, a wait task's timeout_ms, a run's deadline_ms and
// delayed start. Every timer is a key of the wake-up index (w/<due><id>,
// derived from the records: a task's DueAt, a run's WakeAt), so the
// leader's deadline loop proposes the Tick that fires it; an attempt's
// timeout caps its lease, so the reaper ends it. Time is only the entry's
// stamp.

// leaseEnd is when a lease granted or renewed now expires: lease_ms from
// now, but never past the attempt's timeout.
func (a *applier) leaseEnd(t *Task) int64 {
	end := a.now + t.LeaseMS
	if t.TimeoutAt != 0 { // set for forward attempts only
		end = min(end, t.TimeoutAt)
	}
	return end
}

// timedOut ends t's live forward attempt if it ran past its timeout_ms and
// reports whether it did: the attempt fails with a timeout error and is
// retried by the task's policy. A worker that never acknowledged the claim
// is treated as for an expired lease (a fault spends no attempt).
func (a *applier) timedOut(t *Task) bool {
	if t.State != domain.TaskRunning || t.TimeoutAt == 0 || a.now < t.TimeoutAt {
		return false
	}
	r := a.loadRun(t.RunID)
	worker := t.LeaseOwner
	if !t.acked() && a.freeExpiry(r, t) {
		c := a.getCounters()
		c.LeaseExpiries++
		c.LeaseUnacked++
		a.returnUnacked(r, t, worker)
		return true
	}
	msg := fmt.Sprintf("timeout: attempt %d ran past timeout_ms %d (worker %s)", t.Attempt, t.TimeoutMS, worker)
	a.endLease(t, OutcomeTimedOut, msg)
	a.stepTask(r, t, domain.EdgeTimeout, func(e *Event) { e.Error, e.Worker = msg, worker })
	a.failAttempt(r, t, msg, true)
	return true
}

// setDue sets t's ready timer (0 clears it), keeping the wake-up index in
// step with the record.
func (a *applier) setDue(t *Task, at int64) {
	if t.DueAt == at {
		return
	}
	if t.DueAt != 0 {
		a.delFresh(wakeKeyOf(t.DueAt, t))
	}
	t.DueAt = at
	if at != 0 {
		a.setFresh(wakeKeyOf(at, t), []byte{})
	}
}

// armReady starts the timers of a task that just became ready: a wait
// task begins waiting (an attempt, bounded by timeout_ms); another task's
// schedule_to_start_ms starts counting.
func (a *applier) armReady(t *Task) {
	if t.State != domain.TaskReady {
		return
	}
	if a.isSleep(t) {
		a.armSleep(t)
		return
	}
	if a.isRunTask(t) {
		a.startChild(t)
		return
	}
	if t.Type == domain.TypeWait {
		t.Attempt++
		if t.StartedAt == 0 {
			t.StartedAt = a.now
		}
		// A signal may name the wait it answers by this token.
		t.FencingToken = a.index
		if t.TimeoutMS > 0 {
			a.setDue(t, a.now+t.TimeoutMS)
		}
		return
	}
	if t.ScheduleToStartMS > 0 && !t.Late { // an alert fires once per task
		a.setDue(t, a.now+t.ScheduleToStartMS)
	}
}

// fireReady handles a ready task's due timer (the tick already removed its
// key): a wait task that got no signal in time fails (retried by policy,
// waiting again); a dispatchable task no worker claimed in time fails for
// good (a retry would wait in the same line), or, with
// schedule_to_start_policy alert, is flagged late, stays ready and
// claimable, and one event says so (its timer is not armed again). A task
// its run or queue pause holds back is left alone.
func (a *applier) fireReady(r *Run, t *Task) int {
	t.DueAt = 0
	if t.State != domain.TaskReady || r == nil {
		return 0
	}
	if a.isSleep(t) {
		return a.wakeSleep(r, t)
	}
	var msg string
	retryable := true
	if t.Type == domain.TypeWait {
		msg = fmt.Sprintf("timeout: no signal within timeout_ms %d (attempt %d)", t.TimeoutMS, t.Attempt)
	} else {
		if !t.Indexed {
			return 0 // not dispatchable now (run interrupted, queue paused for it)
		}
		if t.ScheduleToStartPolicy == domain.ScheduleToStartAlert {
			t.Late = true
			a.emit(Event{Kind: "task", RunID: t.RunID, TaskKey: t.Key, Transition: domain.EventScheduleToStartExceeded,
				From: string(t.State), To: string(t.State), Attempt: t.Attempt, Queue: t.Queue, Type: t.Type,
				Error: fmt.Sprintf("schedule_to_start: ready for %d ms without a claim; start a worker for queue %q and type %q",
					t.ScheduleToStartMS, t.Queue, t.Type)})
			return 1
		}
		msg = fmt.Sprintf("schedule_to_start: ready for %d ms without a claim; start a worker for queue %q and type %q",
			t.ScheduleToStartMS, t.Queue, t.Type)
		retryable = false
		a.unindexTask(t)
	}
	a.stepTask(r, t, domain.EdgeTimeout, func(e *Event) { e.Error = msg })
	t.Error = msg
	if retryable && a.canRetry(r, t) {
		a.stepTask(r, t, domain.EdgeScheduleRetry, nil)
		a.wake(t, a.now+domain.Backoff(t.Retry, t.ID(), t.Attempt))
		return 1
	}
	t.FinishedAt = a.now
	a.settled(r, t)
	a.derive(r)
	return 1
}

// delayedStart returns a Submit's start time (0 = at once).
func (a *applier) delayedStart(c *Submit) (int64, error) {
	switch {
	case c.StartAt != 0 && c.DelayMS != 0:
		return 0, fmt.Errorf("%w: give start_at or delay_ms, not both", ErrInvalidArgument)
	case c.DelayMS < 0 || c.DelayMS > domain.MaxTimeoutMS:
		return 0, fmt.Errorf("%w: delay_ms %d must be between 0 and %d", ErrInvalidArgument, c.DelayMS, int64(domain.MaxTimeoutMS))
	case c.DelayMS > 0:
		return a.now + c.DelayMS, nil
	case c.StartAt < 0 || c.StartAt > a.now+domain.MaxTimeoutMS:
		return 0, fmt.Errorf("%w: start_at is more than 365 days ahead; submit it later", ErrInvalidArgument)
	}
	return c.StartAt, nil
}

// rearmRun keeps r's timer in the wake-up index in step with its state:
// its delayed start while it waits for it, its deadline while it runs or
// is interrupted, nothing otherwise.
func (a *applier) rearmRun(r *Run) {
	var at int64
	switch {
	case r.State == domain.RunPending && r.StartAt != 0 && r.AdmitSeq == 0:
		at = r.StartAt
	case (r.State == domain.RunRunning || r.State == domain.RunInterrupted) && r.DeadlineAt != 0:
		at = r.DeadlineAt
	}
	if at == r.WakeAt {
		return
	}
	if r.WakeAt != 0 {
		a.del(wakeKey(r.WakeAt, r.ID))
	}
	r.WakeAt = at
	if at != 0 {
		must(a.tx.Set(wakeKey(at, r.ID), []byte{}))
	}
}

// fireRun handles a run's due timer (the tick already removed its key).
func (a *applier) fireRun(id string, at int64) int {
	r := a.loadRun(id)
	if r == nil || r.WakeAt != at {
		return 0
	}
	r.WakeAt = 0
	switch {
	case r.State == domain.RunPending && r.StartAt != 0 && r.AdmitSeq == 0:
		s, cnt := a.getSettings(), a.getCounters()
		if s.MaxRunningRuns > 0 && (cnt.ActiveRuns >= s.MaxRunningRuns || a.hasPendingRuns()) {
			a.queueForAdmission(r) // its time came; it waits for a free slot like any run
		} else {
			a.start(r)
		}
	case r.State == domain.RunRunning || r.State == domain.RunInterrupted:
		reason := fmt.Sprintf("deadline: the run passed its deadline_ms %d", r.DeadlineMS)
		if r.OnFailure == domain.OnFailureRevert {
			r.Reason = reason
			a.startRevert(r)
		} else {
			a.cancelRun(r, reason)
		}
	}
	a.rearmRun(r)
	return 1
}

// queueForAdmission puts a pending run at the back of the admission queue.
func (a *applier) queueForAdmission(r *Run) {
	cnt := a.getCounters()
	cnt.NextAdmit++
	r.AdmitSeq = cnt.NextAdmit
	must(a.tx.Set(pendingKey(r.AdmitSeq, r.ID), []byte{}))
	a.rearmRun(r)
}
