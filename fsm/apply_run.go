package fsm

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// Run lifecycle: submit, admission, derivation, the verbs cancel, interrupt,
// resume and revert, and replay.

// ValidRunID reports whether id can name a run: 1-64 key characters.
func ValidRunID(id string) bool { return len(id) > 0 && len(id) <= 64 && domain.ValidKey(id) }

func (a *applier) applySubmit(c *Submit) any {
	if !ValidRunID(c.ID) {
		return fmt.Errorf("%w: run id %q must be 1-64 letters, digits, '_', '.', ':' or '-' (a UUID)", ErrInvalidArgument, c.ID)
	}
	if r := a.loadRun(c.ID); r != nil {
		// A retry of the creating call (same nonce) learns it created the run.
		return &SubmitResult{ID: r.ID, State: r.State, Created: c.Nonce != "" && c.Nonce == r.Nonce}
	}
	c.Spec = a.versioned(c.Spec)
	if err := a.validSpec(c.Spec); err != nil {
		return err
	}
	if err := a.checkRunInput(c.Input, c.Labels, c.IfFull); err != nil {
		return err
	}
	startAt, err := a.delayedStart(c)
	if err != nil {
		return err
	}
	a.startAt = startAt
	defer func() { a.startAt = 0 }()
	r, err := a.createRun(c.ID, c.Spec.NormalizeWith(a.getSettings().DefaultMaxAttempts), c.Input, c.Labels, "", nil, c.IfFull, c.Nonce)
	if err != nil {
		return err
	}
	return &SubmitResult{ID: r.ID, State: r.State, Created: true}
}

func (a *applier) checkRunInput(input json.RawMessage, labels map[string]string, ifFull string) error {
	if len(input) > a.limits.MaxInputBytes {
		return fmt.Errorf("%w: run input of %d bytes exceeds the limit of %d", ErrTooLarge, len(input), a.limits.MaxInputBytes)
	}
	if input != nil && !json.Valid(input) {
		return fmt.Errorf("%w: run input is not valid JSON", ErrInvalidArgument)
	}
	if len(labels) > a.limits.MaxLabels {
		return fmt.Errorf("%w: %d labels exceed the limit of %d", ErrInvalidArgument, len(labels), a.limits.MaxLabels)
	}
	switch ifFull {
	case "", "queue", "reject":
	default:
		return fmt.Errorf("%w: if_full %q must be \"queue\" or \"reject\"", ErrInvalidArgument, ifFull)
	}
	return nil
}

// createRun stores a new run and its tasks, then admits it or queues it for
// admission. reuse maps task keys to parent tasks whose results are reused.
func (a *applier) createRun(id string, spec domain.Spec, input json.RawMessage, labels map[string]string,
	parent string, reuse map[string]*Task, ifFull, nonce string) (*Run, error) {
	s, cnt := a.getSettings(), a.getCounters()
	full := s.MaxRunningRuns > 0 && (cnt.ActiveRuns >= s.MaxRunningRuns || a.hasPendingRuns())
	if full && ifFull == "reject" {
		return nil, fmt.Errorf("%w: %d of %d runs are running (settings max_running_runs); retry later or submit with if_full \"queue\"",
			ErrTooManyRuns, cnt.ActiveRuns, s.MaxRunningRuns)
	}
	r := &Run{
		ID: id, Workflow: spec.Name, Spec: spec, OnFailure: spec.OnFailure, Input: input, Labels: a.probeLabels(labels),
		ParentID: parent, ReplayOf: parent, Nonce: nonce,
		Counts:    domain.TaskCounts{domain.TaskPending: len(spec.Tasks)},
		CreatedAt: a.now, CreateIndex: a.index, ModifyIndex: a.index,
		DeadlineMS: spec.DeadlineMS,
	}
	if a.startAt > a.now {
		r.StartAt = a.startAt // set before the first state: rearmRun arms it
	}
	a.newRun(r)
	a.indexLabels(r)
	a.putFresh(specKey(id), (*specMsg)(&spec))
	a.putRules(id, spec)
	a.setRunState(r, domain.RunPending)
	a.emit(Event{Kind: "run", RunID: id, Transition: "created", To: string(domain.RunPending)})

	var dependents map[string][]string // made for the first dependency
	all := spec.Tasks
	if len(spec.Finally) > 0 {
		all = append(slices.Clip(spec.Tasks), spec.Finally...)
		r.Counts[domain.TaskPending] = len(all)
	}
	for _, ts := range all {
		for _, d := range ts.Deps {
			if dependents == nil {
				dependents = map[string][]string{}
			}
			dependents[d] = append(dependents[d], ts.Key)
		}
	}
	tasks := make([]*Task, 0, len(all))
	for i, ts := range all {
		t := &Task{
			RunID: id, Key: ts.Key, Seq: i, Type: ts.Type, Queue: ts.Queue, Input: ts.Input,
			Deps: ts.Deps, Dependents: dependents[ts.Key], Priority: ts.Priority, LeaseMS: ts.LeaseMS,
			Retry: *ts.Retry, RevertType: ts.RevertType, State: domain.TaskPending,
			TimeoutMS: ts.TimeoutMS, ScheduleToStartMS: ts.ScheduleToStartMS, Signal: ts.Signal,
			ScheduleToStartPolicy: ts.ScheduleToStartPolicy, CreateIndex: a.index, ModifyIndex: a.index,
		}
		a.newTask(t)
		tasks = append(tasks, t)
		if p := reuse[ts.Key]; p != nil {
			t.Result, t.Reused, t.Attempt = p.Result, true, 0
			t.StartedAt, t.FinishedAt = a.now, a.now
			a.stepTask(r, t, domain.EdgeReuseResult, nil)
		}
	}
	switch {
	case r.StartAt != 0:
		// Delayed: pending until its start time (fireRun admits it).
	case full:
		a.queueForAdmission(r)
	default:
		a.startTasks(r, tasks)
	}
	return r, nil
}

func (a *applier) hasPendingRuns() bool {
	found := false
	must(a.tx.Scan(pfxPending, nil, false, func(_, _ []byte) bool { found = true; return false }))
	return found
}

// start admits a run: it starts running and its roots become ready.
func (a *applier) start(r *Run) {
	a.startTasks(r, nil)
}

// startTasks is start with the run's tasks in Seq order when the caller
// has them: createRun, whose run and tasks are new in this command (a
// brand-new run id holds no stored task, so runTasks would list exactly
// these, at the cost of a store scan per submit). nil lists them.
func (a *applier) startTasks(r *Run, tasks []*Task) {
	if r.DeadlineMS > 0 && r.DeadlineAt == 0 {
		r.DeadlineAt = a.now + r.DeadlineMS // armed by the state change
	}
	a.stepRun(r, domain.EdgeStart)
	if tasks == nil {
		tasks = a.runTasks(r.ID)
	}
	for _, t := range tasks {
		a.advance(r, t)
	}
	a.derive(r)
}

// admitPending starts queued runs, FIFO, while the cap allows.
func (a *applier) admitPending() {
	s, cnt := a.getSettings(), a.getCounters()
	if p, ok := a.tx.(store.PrefixProber); ok && !p.MayHavePrefix(pfxPending) {
		return // the usual case: no run waits (and no scan closure to allocate)
	}
	for s.MaxRunningRuns <= 0 || cnt.ActiveRuns < s.MaxRunningRuns {
		var key []byte
		must(a.tx.Scan(pfxPending, nil, false, func(k, _ []byte) bool {
			key = slices.Clone(k)
			return false
		}))
		if key == nil {
			return
		}
		a.del(key)
		id := string(key[len(pfxPending)+8:])
		if r := a.loadRun(id); r != nil && r.State == domain.RunPending {
			a.start(r)
		}
	}
}

func (a *applier) depsSucceeded(t *Task) bool {
	for _, d := range t.Deps {
		dt := a.loadTask(t.RunID, d)
		if dt == nil || dt.State != domain.TaskSucceeded {
			return false
		}
	}
	return true
}

// promote makes a pending task whose dependencies all succeeded ready.
func (a *applier) promote(r *Run, t *Task) {
	if l := a.loopOf(r, t); l != nil && !l.Expanded {
		a.expandLoop(r, t, l)
		return
	}
	a.stepTask(r, t, domain.EdgeDependenciesSatisfied, nil)
	a.makeReady(r, t)
}

// derive recomputes the run state from its task counts and takes the edge.
func (a *applier) derive(r *Run) {
	if f := a.finallyOf(r); f != nil && a.deriveFinally(r, f) {
		return
	}
	next := a.deriveState(r)
	if next == r.State {
		return
	}
	if next == domain.RunFailed && r.State == domain.RunRunning && r.OnFailure == domain.OnFailureRevert {
		a.startRevert(r)
		return
	}
	edge, ok := domain.RunMachine.EdgeBetween(r.State, next)
	if !ok {
		panic(fmt.Sprintf("derivation %s -> %s has no edge", r.State, next))
	}
	a.stepRun(r, edge)
	if next == domain.RunFailed || next == domain.RunCancelled {
		a.stopForward(r, "run "+string(next))
		a.propagate(r, MsgCancelRun, "run "+string(next)) // nothing waits for its running child runs
	}
	if !activeRun(next) {
		a.admitPending()
	}
}

// stopForward cancels the tasks of a run that have not started, when the
// run can no longer succeed. Running tasks may finish; their results are kept.
func (a *applier) stopForward(r *Run, why string) {
	for _, t := range a.runTasks(r.ID) {
		a.cancelWaiting(r, t, why)
	}
}

// cancelWaiting cancels t if it is pending, ready or retrying.
func (a *applier) cancelWaiting(r *Run, t *Task, why string) bool {
	switch t.State {
	case domain.TaskPending:
		a.stepTask(r, t, domain.EdgeCancelPending, nil)
	case domain.TaskReady:
		a.unindexTask(t)
		a.stepTask(r, t, domain.EdgeCancelReady, nil)
	case domain.TaskRetrying:
		a.unwake(t)
		a.stepTask(r, t, domain.EdgeCancelRetrying, nil)
	default:
		return false
	}
	t.FinishedAt = a.now
	if t.Error == "" {
		t.Error = why
	}
	return true
}

func (a *applier) applyRunVerb(c *RunVerb) any {
	r := a.loadRun(c.ID)
	if r == nil {
		return fmt.Errorf("%w: run %s", ErrNotFound, c.ID)
	}
	switch c.msg {
	case MsgCancelRun:
		return a.cancelRun(r, c.Reason)
	case MsgInterrupt:
		return a.interruptRun(r)
	case MsgResume:
		return a.resumeRun(r)
	case MsgRevert:
		if f := a.finallyOf(r); !domain.RunMachine.Can(r.State, domain.EdgeRevert) || f != nil && f.Started {
			return &ChangedResult{} // the body is over: its finally tasks run
		}
		if c.Reason != "" {
			r.Reason = c.Reason
		}
		a.startRevert(r)
		return &ChangedResult{Changed: true}
	}
	return fmt.Errorf("%w: %s is not a run verb", ErrBadCommand, c.msg)
}

func (a *applier) cancelRun(r *Run, reason string) any {
	if reason == "" {
		reason = "cancelled by request"
	}
	var edge string
	switch r.State {
	case domain.RunPending:
		edge = domain.EdgeCancelBeforeStart
		if r.AdmitSeq != 0 {
			a.del(pendingKey(r.AdmitSeq, r.ID))
		}
	case domain.RunRunning, domain.RunReverting:
		edge = domain.EdgeCancel
	case domain.RunInterrupted:
		edge = domain.EdgeCancelInterrupted
	default:
		return &ChangedResult{}
	}
	r.Reason = reason
	for _, t := range a.runTasks(r.ID) {
		if a.cancelWaiting(r, t, reason) {
			continue
		}
		switch t.State {
		case domain.TaskRunning:
			a.endLease(t, OutcomeCancelled, reason)
			a.stepTask(r, t, domain.EdgeCancelRunning, nil)
			t.FinishedAt = a.now
		case domain.TaskReverting:
			a.stopCompensation(t, reason)
			a.stepTask(r, t, domain.EdgeCancelReverting, nil)
		}
	}
	a.stepRun(r, edge)
	a.propagate(r, MsgCancelRun, reason)
	a.admitPending()
	return &ChangedResult{Changed: true}
}

func (a *applier) interruptRun(r *Run) any {
	if !domain.RunMachine.Can(r.State, domain.EdgeInterrupt) {
		return &ChangedResult{}
	}
	r.InterruptedFrom = r.State
	a.stepRun(r, domain.EdgeInterrupt)
	for _, t := range a.runTasks(r.ID) {
		a.unindexTask(t) // nothing new is dispatched; running tasks may finish
	}
	a.propagate(r, MsgInterrupt, "")
	return &ChangedResult{Changed: true}
}

func (a *applier) resumeRun(r *Run) any {
	if r.State != domain.RunInterrupted {
		return &ChangedResult{}
	}
	from := r.InterruptedFrom
	r.InterruptedFrom = ""
	if from == domain.RunReverting {
		a.stepRun(r, domain.EdgeRevert)
		a.reindex(r)
		a.advanceRevert(r)
	} else {
		a.stepRun(r, domain.EdgeResume)
		for _, t := range a.runTasks(r.ID) {
			a.advance(r, t)
		}
		a.reindex(r)
	}
	a.propagate(r, MsgResume, "")
	a.derive(r)
	return &ChangedResult{Changed: true}
}

// reindex puts every dispatchable task of r back into the ready index.
func (a *applier) reindex(r *Run) {
	for _, t := range a.runTasks(r.ID) {
		a.indexTask(r, t)
	}
}

func (a *applier) applyReplay(c *Replay) any {
	if !ValidRunID(c.NewID) {
		return fmt.Errorf("%w: run id %q", ErrInvalidArgument, c.NewID)
	}
	p := a.loadRun(c.ParentID)
	if p == nil {
		return fmt.Errorf("%w: run %s", ErrNotFound, c.ParentID)
	}
	if r := a.loadRun(c.NewID); r != nil {
		return &SubmitResult{ID: r.ID, State: r.State, Created: false}
	}
	spec, err := loadSpec(a.tx, p.ID)
	must(err)
	if spec == nil {
		return fmt.Errorf("%w: spec of run %s", ErrNotFound, p.ID)
	}
	input := p.Input
	if c.Input != nil {
		input = c.Input
	}
	if err := a.checkRunInput(input, nil, ""); err != nil {
		return err
	}
	var reuse map[string]*Task
	if c.ReuseSucceeded {
		reuse = map[string]*Task{}
		spawners := map[string]bool{}
		tasks := a.runTasks(p.ID)
		for _, t := range tasks {
			if t.SpawnedBy != "" {
				spawners[t.SpawnedBy] = true
			}
		}
		for _, t := range tasks {
			// A task that spawned children runs again: its children are not
			// part of the frozen spec and must be spawned anew.
			if t.State == domain.TaskSucceeded && t.SpawnedBy == "" && !spawners[t.Key] {
				reuse[t.Key] = t
			}
		}
		// A result is reused only if every dependency's is: a task after
		// one that runs again must see the new results, not stale ones.
		for changed := true; changed; {
			changed = false
			for _, ts := range spec.Tasks {
				if reuse[ts.Key] == nil {
					continue
				}
				for _, d := range ts.Deps {
					if reuse[d] == nil {
						delete(reuse, ts.Key)
						changed = true
						break
					}
				}
			}
		}
	}
	r, err := a.createRun(c.NewID, *spec, input, a.replayLabels(p.Labels), p.ID, reuse, "", "")
	if err != nil {
		return err
	}
	return &SubmitResult{ID: r.ID, State: r.State, Created: true}
}

// replayLabels are the labels a replay takes from its parent: all of them,
// but from V2 not the schedule's (domain.ScheduleLabel): a replay is started
// by an operator, not by the schedule, and must not count among its runs.
func (a *applier) replayLabels(labels map[string]string) map[string]string {
	if _, ok := labels[domain.ScheduleLabel]; !ok || !a.atLeast(V2) {
		return labels
	}
	out := make(map[string]string, len(labels)-1)
	for k, v := range labels {
		if k != domain.ScheduleLabel {
			out[k] = v
		}
	}
	return out
}
