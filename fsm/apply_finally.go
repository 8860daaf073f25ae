package fsm

import (
	"encoding/json"
	"slices"

	"github.com/flowd/flowd/fsm/domain"
)

// Exit handlers (V2; domain/finally.go). A run with finally tasks keeps,
// in its rules record, their keys, whether they started and the body's
// outcome. Derivation looks at the body only (the run's counts without
// the finally tasks): when the body reaches an outcome the finally tasks
// start (their input carries it) and the run stays running, or reverting
// after a revert; once they have all settled the run takes the body's
// outcome, whatever theirs.

// finallyState is the rules record's part for finally tasks.
type finallyState struct {
	Keys    []string        `json:"keys"`
	Started bool            `json:"started,omitempty"`
	Outcome domain.RunState `json:"outcome,omitempty"`
}

// finallyOf returns r's finally state, nil for a run without finally tasks.
func (a *applier) finallyOf(r *Run) *finallyState {
	if rr := a.rulesFor(r.ID); rr != nil {
		return rr.Finally
	}
	return nil
}

// isFinally reports whether t is one of r's finally tasks.
func (a *applier) isFinally(r *Run, t *Task) bool {
	f := a.finallyOf(r)
	return f != nil && slices.Contains(f.Keys, t.Key)
}

// executing reports whether r's forward tasks may progress: it is running
// or interrupted, or its finally tasks run after a revert.
func (a *applier) executing(r *Run) bool {
	switch r.State {
	case domain.RunRunning, domain.RunInterrupted:
		return true
	case domain.RunReverting:
		f := a.finallyOf(r)
		return f != nil && f.Started
	}
	return false
}

// held reports whether t is a finally task whose body has not reached its
// outcome yet (it is not promoted).
func (a *applier) held(r *Run, t *Task) bool {
	f := a.finallyOf(r)
	return f != nil && !f.Started && slices.Contains(f.Keys, t.Key)
}

// bodyCounts are r's task counts without its finally tasks.
func (a *applier) bodyCounts(r *Run, f *finallyState) domain.TaskCounts {
	c := make(domain.TaskCounts, len(r.Counts))
	for s, n := range r.Counts {
		c[s] = n
	}
	for _, k := range f.Keys {
		if t := a.loadTask(r.ID, k); t != nil {
			if c[t.State]--; c[t.State] <= 0 {
				delete(c, t.State)
			}
		}
	}
	return c
}

// deriveFinally is derive for a run with finally tasks; false: derive as
// usual (the body has not reached an outcome and the run only moves
// between pending and running).
func (a *applier) deriveFinally(r *Run, f *finallyState) bool {
	switch r.State {
	case domain.RunPending, domain.RunRunning, domain.RunReverting:
	default:
		return false
	}
	if f.Started {
		fc := domain.TaskCounts{}
		for _, k := range f.Keys {
			if t := a.loadTask(r.ID, k); t != nil {
				fc[t.State]++
			}
		}
		if fc[domain.TaskPending]+fc[domain.TaskReady]+fc[domain.TaskRunning]+fc[domain.TaskRetrying] > 0 {
			return true // the finally tasks are still at work
		}
		edge, ok := domain.RunMachine.EdgeBetween(r.State, f.Outcome)
		if !ok {
			return true // cannot happen: outcomes are reached from these states
		}
		a.stepRun(r, edge)
		if r.State == domain.RunFailed || r.State == domain.RunCancelled {
			// As derive does: a child run its body's task started and
			// that runs again (run.retry of the child) ends with it.
			a.propagate(r, MsgCancelRun, "run "+string(r.State))
		}
		if !activeRun(r.State) {
			a.admitPending()
		}
		return true
	}
	body := a.bodyCounts(r, f)
	var next domain.RunState
	if a.decided(r) {
		next = domain.DeriveDecided(r.State, body)
	} else {
		next = domain.Derive(r.State, body)
	}
	if !next.Done() {
		return r.State == domain.RunReverting // a revert in progress; forward: derive as usual
	}
	if next == domain.RunFailed && r.State == domain.RunRunning && r.OnFailure == domain.OnFailureRevert {
		a.startRevert(r) // the finally tasks run after the revert
		return true
	}
	a.startFinally(r, f, next)
	return true
}

func nilIfNoInput(in json.RawMessage) any {
	if len(in) == 0 {
		return nil
	}
	return in
}

// startFinally records the body's outcome and starts the finally tasks.
func (a *applier) startFinally(r *Run, f *finallyState, outcome domain.RunState) {
	f.Started, f.Outcome = true, outcome
	rr := a.rulesFor(r.ID)
	a.put(rulesKey(r.ID), rr)
	in := domain.FinallyOutcome{State: outcome, Failed: []string{}, Error: r.Reason}
	tasks := a.runTasks(r.ID)
	for _, t := range tasks {
		if !slices.Contains(f.Keys, t.Key) {
			// Failed, or failed and then reverted (a reverted task that had
			// succeeded has no error).
			if t.State == domain.TaskFailed || t.State == domain.TaskReverted && t.Error != "" {
				in.Failed = append(in.Failed, t.Key)
			}
			if outcome == domain.RunFailed || outcome == domain.RunCancelled {
				a.cancelWaiting(r, t, "run "+string(outcome)) // what the body can no longer use
			}
		}
	}
	if outcome == domain.RunFailed || outcome == domain.RunCancelled {
		a.propagate(r, MsgCancelRun, "run "+string(outcome))
	}
	// Not an edge (no From): the run stays where it is.
	a.emit(Event{Kind: "run", RunID: r.ID, Transition: "finally", To: string(r.State), Error: "body " + string(outcome)})
	spec, err := loadSpec(a.tx, r.ID)
	must(err)
	own := map[string]json.RawMessage{} // the spec's inputs (a retried run's tasks hold the last outcome)
	if spec != nil {
		for _, ts := range spec.Finally {
			own[ts.Key] = ts.Input
		}
	}
	for _, t := range tasks {
		if slices.Contains(f.Keys, t.Key) {
			var own any = nilIfNoInput(own[t.Key])
			b, err := json.Marshal(domain.FinallyInput{Outcome: in, Input: own})
			must(err)
			t.Input = b
		}
	}
	for _, t := range tasks {
		a.advance(r, t)
	}
}
