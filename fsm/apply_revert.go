package fsm

import (
	"github.com/flowd/flowd/fsm/domain"
)

// Revert (saga): compensation handlers run for every task that succeeded,
// failed or was running, in reverse dependency order: a task's compensation
// starts only after every task that depends on it has finished reverting.
// Tasks without a revert_type are marked reverted directly. A compensation
// that exhausts its attempts leaves its task failed; the remaining
// compensations still run (best effort, so nothing that can be undone is
// left done), and the run ends failed instead of reverted.

// startRevert takes r into reverting: waiting tasks are cancelled, running
// tasks lose their leases, and finished tasks wait for their compensation.
func (a *applier) startRevert(r *Run) {
	r.InterruptedFrom = ""
	a.stepRun(r, domain.EdgeRevert)
	for _, t := range a.runTasks(r.ID) {
		if a.held(r, t) {
			continue // a finally task runs after the revert
		}
		if a.cancelWaiting(r, t, "run reverted") {
			continue
		}
		switch t.State {
		case domain.TaskRunning:
			a.endLease(t, OutcomeRevoked, "lease revoked: run reverted")
			a.stepTask(r, t, domain.EdgeRevert, nil)
			t.Comp = &Compensation{Phase: CompWaiting}
		case domain.TaskSucceeded, domain.TaskFailed:
			a.stepTask(r, t, domain.EdgeRevert, nil)
			t.Comp = &Compensation{Phase: CompWaiting}
		}
	}
	a.propagate(r, MsgCancelRun, "reverted") // nothing waits for its running child runs
	// A run interrupted while reverting lost its ready compensations from
	// the index; reverting it again (rather than resuming) must restore them.
	a.reindex(r)
	a.advanceRevert(r)
	a.derive(r)
}

// advanceRevert starts the compensation of every waiting task whose
// dependents are all done reverting, until nothing changes.
func (a *applier) advanceRevert(r *Run) {
	if r.State != domain.RunReverting {
		return
	}
	tasks := a.runTasks(r.ID)
	byKey := make(map[string]*Task, len(tasks))
	for _, t := range tasks {
		byKey[t.Key] = t
	}
	for changed := true; changed; {
		changed = false
		for _, t := range tasks {
			if t.State != domain.TaskReverting || t.Comp == nil || t.Comp.Phase != CompWaiting {
				continue
			}
			blocked := false
			for _, d := range t.Dependents {
				if dt := byKey[d]; dt != nil && dt.State == domain.TaskReverting {
					blocked = true
					break
				}
			}
			if blocked {
				continue
			}
			changed = true
			if t.RevertType == "" {
				t.Comp = nil
				a.stepTask(r, t, domain.EdgeReverted, nil)
				continue
			}
			t.Comp.Phase = CompReady
			a.emit(Event{Kind: "compensation", RunID: t.RunID, TaskKey: t.Key, Transition: "ready",
				From: CompWaiting, To: CompReady, Queue: t.Queue, Type: t.RevertType})
			a.makeReady(r, t)
		}
	}
}

// failCompensation handles a failed compensation attempt: retry by the
// task's retry policy, or give up and leave the task failed.
func (a *applier) failCompensation(r *Run, t *Task, msg string, retryable bool) {
	t.Comp.Error = msg
	if retryable && t.Comp.Attempt < t.Retry.MaxAttempts {
		due := a.now + domain.Backoff(t.Retry, t.ID()+"#revert", t.Comp.Attempt)
		t.Comp.Phase, t.Comp.RetryAt = CompRetrying, due
		a.wake(t, due)
		a.emit(Event{Kind: "compensation", RunID: t.RunID, TaskKey: t.Key, Transition: "fail",
			From: CompRunning, To: CompRetrying, Attempt: t.Comp.Attempt, Queue: t.Queue, Type: t.RevertType, Error: msg})
		return
	}
	t.Comp.Phase = "failed"
	t.Error = "compensation failed: " + msg
	t.FinishedAt = a.now
	a.stepTask(r, t, domain.EdgeRevertFailed, func(e *Event) { e.Error = msg })
	a.advanceRevert(r)
}

// stopCompensation abandons a reverting task's compensation (run cancelled).
func (a *applier) stopCompensation(t *Task, reason string) {
	if t.Comp == nil {
		return
	}
	switch t.Comp.Phase {
	case CompReady:
		a.unindexTask(t)
	case CompRunning:
		a.endLease(t, OutcomeCancelled, reason)
	case CompRetrying:
		a.unwake(t)
	}
	t.Comp.Phase = "cancelled"
	t.FinishedAt = a.now
}
