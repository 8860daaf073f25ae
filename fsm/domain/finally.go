package domain

import "fmt"

// Exit handlers (state-machine version 2): a spec's finally tasks run once
// the run's body (its tasks, spawned children included) has reached its
// outcome — succeeded, failed, cancelled by derivation, or, with
// on_failure revert, reverted or failed after the revert finished. The run
// stays running (or reverting) while they run and then takes the body's
// outcome: their own failure is visible (the task is failed) but does not
// change it. Each finally task gets the outcome in its input
// (FinallyInput). They depend only on each other, and respect queues,
// caps, leases and retries like any task. A cancel (by request or the
// deadline) stops them with the rest.

// FinallyInput is the input a finally task receives: the body's outcome
// and the task's own input from the spec.
type FinallyInput struct {
	Outcome FinallyOutcome `json:"outcome"`
	Input   any            `json:"input"`
}

// FinallyOutcome is how the body ended.
type FinallyOutcome struct {
	State RunState `json:"state"`
	// Failed lists the body's failed tasks (after a revert: those that had
	// failed before it), in display order.
	Failed []string `json:"failed"`
	// Error is the run's reason, if any (a failed run's first error is in
	// its failed tasks).
	Error string `json:"error,omitempty"`
}

// UsesV2 reports whether a spec uses what state-machine version 2 brought:
// trigger rules, conditions, finally tasks or sleep tasks.
func (s Spec) UsesV2() bool {
	return s.UsesDecisions() || len(s.Finally) > 0 || s.UsesSleep() || s.UsesLoops() || s.UsesChildRuns()
}

// StripV2 returns the spec without the fields of state-machine version 2
// (what a release before them reads from the same bytes).
func (s Spec) StripV2() Spec {
	out := s
	out.Finally = nil
	if s.Tasks == nil {
		return out
	}
	out.Tasks = make([]TaskSpec, len(s.Tasks))
	for i, t := range s.Tasks {
		out.Tasks[i] = t.StripV2()
	}
	return out
}

// StripV2 returns the task without the fields of state-machine version 2.
func (t TaskSpec) StripV2() TaskSpec {
	t.When, t.Trigger, t.DurationMS, t.Until, t.ForEach, t.MaxParallel, t.Definition = "", "", 0, "", "", 0, ""
	t.Spec = nil
	return t
}

func validateFinally(s Spec, lim Limits) problems {
	if len(s.Finally) == 0 {
		return nil
	}
	var ps problems
	if len(s.Tasks)+len(s.Finally) > lim.MaxTasks {
		ps.add(CodeTooManyTasks, "finally", "%d tasks and %d finally tasks exceed the limit of %d per run", len(s.Tasks), len(s.Finally), lim.MaxTasks)
	}
	body := make(map[string]bool, len(s.Tasks))
	for _, t := range s.Tasks {
		body[t.Key] = true
	}
	ps = append(ps, validateTasks(s.Finally, "finally", nil, lim)...)
	for i, t := range s.Finally {
		path := fmt.Sprintf("finally[%d]", i)
		if body[t.Key] {
			ps.add(CodeDuplicateKey, path+".key", "key %q is already used by a task of the body", t.Key)
		}
		if t.When != "" {
			ps.add(CodeBadCondition, path+".when", "a finally task has no condition: it runs whatever the outcome (read it in its input)")
		}
		if t.Trigger != "" {
			ps.add(CodeBadTrigger, path+".trigger", "a finally task has no trigger rule: it runs once the body reached its outcome")
		}
	}
	return ps
}
