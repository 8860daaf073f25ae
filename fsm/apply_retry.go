package fsm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flowd/flowd/fsm/domain"
)

// Retry in place (V2): run.retry takes a failed or cancelled run back to
// running in the same run. Its failed and cancelled tasks (or one of them)
// go back to pending (edge reset) and are promoted like any pending task;
// their attempt history stays, the attempt numbers go on, and the retry
// policy counts the attempts after the retry only (the rules record's
// Base). The tasks the failure left behind go back too: in a run without
// rules the failure cancelled every task still waiting, in a run with
// rules its dependents were skipped, and a skipped task is decided again
// (its condition may see other results now).

// RunRetry is run.retry.
type RunRetry struct {
	Stamped
	ID string `json:"id"`
	// Task, when set, is the one failed or cancelled task to run again
	// (with the tasks its failure left cancelled or skipped).
	Task string `json:"task,omitempty"`
}

// Type implements Command.
func (*RunRetry) Type() MsgType { return MsgRunRetry }

// RetryResult is run.retry's result.
type RetryResult struct {
	State domain.RunState `json:"state"`
	// Tasks are the keys taken back to pending, in display order.
	Tasks []string `json:"tasks"`
}

func (a *applier) applyRunRetry(c *RunRetry) any {
	r := a.loadRun(c.ID)
	if r == nil {
		return fmt.Errorf("%w: run %s", ErrNotFound, c.ID)
	}
	if !domain.RunMachine.Can(r.State, domain.EdgeRetry) {
		why := "a run is retried once it failed or was cancelled"
		switch {
		case activeRun(r.State) || r.State == domain.RunPending:
			why = "it has not ended: wait for it (`flowd run wait`), or cancel it first"
		case r.State == domain.RunSucceeded:
			why = "nothing failed"
		case r.State == domain.RunReverted:
			why = "it was undone by a revert: replay it (`flowd run replay`)"
		}
		return fmt.Errorf("%w: run %s is %s; %s", ErrInvalidArgument, r.ID, r.State, why)
	}
	tasks := a.runTasks(r.ID)
	if slices.ContainsFunc(tasks, func(t *Task) bool { return t.State == domain.TaskReverted || t.Comp != nil }) {
		return fmt.Errorf("%w: run %s was partly reverted before it was cancelled; replay it (`flowd run replay`)", ErrInvalidArgument, r.ID)
	}
	decided := a.decided(r)
	fin := a.finallyOf(r)
	var reset []*Task
	if c.Task != "" {
		i := slices.IndexFunc(tasks, func(t *Task) bool { return t.Key == c.Task })
		if i < 0 {
			return fmt.Errorf("%w: task %s/%s", ErrNotFound, r.ID, c.Task)
		}
		t := tasks[i]
		if fin != nil && slices.Contains(fin.Keys, t.Key) {
			return fmt.Errorf("%w: %s is a finally task: it runs again after the body; retry a task of the body, or the run", ErrInvalidArgument, t.Key)
		}
		if t.State != domain.TaskFailed && t.State != domain.TaskCancelled {
			return fmt.Errorf("%w: task %s is %s; only a failed or cancelled task is retried", ErrInvalidArgument, t.ID(), t.State)
		}
		var others []string
		for _, o := range tasks {
			if o != t && o.State == domain.TaskFailed && (fin == nil || !slices.Contains(fin.Keys, o.Key)) {
				others = append(others, o.Key)
			}
		}
		if len(others) > 0 && !decided {
			return fmt.Errorf("%w: run %s has other failed tasks (%s): it would fail again at once; retry the whole run (without a task)",
				ErrInvalidArgument, r.ID, strings.Join(others, ", "))
		}
		reset = append(reset, t)
	}
	for _, t := range tasks {
		switch {
		case fin != nil && slices.Contains(fin.Keys, t.Key):
			if t.State != domain.TaskPending && domain.TaskMachine.Can(t.State, domain.EdgeReset) {
				reset = append(reset, t) // finally tasks run again after the retried body
			}
		case c.Task != "" && t.Key == c.Task:
		case t.State == domain.TaskCancelled, t.State == domain.TaskSkipped && decided:
			reset = append(reset, t)
		case t.State == domain.TaskFailed && c.Task == "":
			reset = append(reset, t)
		}
	}
	for _, t := range reset {
		if l := a.loopOf(r, t); l != nil && l.Expanded {
			return fmt.Errorf("%w: the for_each task %s failed and its loop cannot be run again in place; replay the run (`flowd run replay --reuse-succeeded`)", ErrInvalidArgument, t.Key)
		}
	}
	if len(reset) == 0 {
		return fmt.Errorf("%w: run %s has no failed, cancelled or skipped task to retry", ErrInvalidArgument, r.ID)
	}
	sortTasks(reset)
	rr := a.rulesFor(r.ID)
	if rr == nil {
		rr = &runRules{}
		a.countRulesRun(1)
	}
	res := &RetryResult{}
	for _, t := range reset {
		if t.Attempt > 0 {
			if rr.Base == nil {
				rr.Base = map[string]int{}
			}
			rr.Base[t.Key] = t.Attempt
		}
		t.Error, t.FinishedAt, t.RetryAt = "", 0, 0
		a.stepTask(r, t, domain.EdgeReset, nil)
		res.Tasks = append(res.Tasks, t.Key)
	}
	if rr.Finally != nil {
		rr.Finally.Started, rr.Finally.Outcome = false, ""
	}
	a.setRules(r.ID, rr)
	a.put(rulesKey(r.ID), rr)
	r.Reason = ""
	if r.DeadlineMS > 0 {
		r.DeadlineAt = a.now + r.DeadlineMS // a new deadline from the retry
	}
	a.stepRun(r, domain.EdgeRetry)
	for _, t := range a.runTasks(r.ID) {
		a.advance(r, t)
	}
	a.derive(r)
	res.State = r.State
	return res
}

// attemptBase is how many of t's attempts came before its run's last
// run.retry (they do not count against its retry policy).
func (a *applier) attemptBase(r *Run, t *Task) int {
	if rr := a.rulesFor(r.ID); rr != nil {
		return rr.Base[t.Key]
	}
	return 0
}
