package domain

import "fmt"

// Workflows that decide (state-machine version 2): a task's trigger rule
// and its when condition, decided once, when every dependency has settled.
//
// A task whose dependencies have all settled (succeeded, failed, skipped,
// cancelled or reverted) is decided in the same entry as the last of them:
//
//  1. its trigger rule (Triggers) looks at how its dependencies ended; a
//     rule that is not met skips the task (EdgeSkip);
//  2. otherwise its when condition (an expression, fsm/expr) is evaluated
//     over the run's input, labels and the states and results of its
//     dependencies: false skips it, an error fails it unrun
//     (EdgeConditionFailed), true (or no condition) makes it ready.
//
// A skipped task is settled and counts like a success for its run; its
// dependents are decided in turn, so under the default rule
// (all_succeeded) the dependents of a skipped task are skipped too, as in
// Airflow, and a rule that accepts skipped dependencies (all_done,
// none_failed, one_succeeded with another that succeeded) runs them.
//
// Unlike Airflow, one_failed and one_succeeded also wait for every
// dependency to settle: one decision per task, at one point of the log.

// Trigger rule names (TaskSpec.Trigger; Airflow's names).
const (
	TriggerAllSucceeded = "all_succeeded"
	TriggerAllDone      = "all_done"
	TriggerOneFailed    = "one_failed"
	TriggerAllFailed    = "all_failed"
	TriggerOneSucceeded = "one_succeeded"
	TriggerNoneFailed   = "none_failed"
)

// DepOutcomes counts how a task's settled dependencies ended. Failed
// counts failed, cancelled and reverted dependencies (none of them
// produced a result).
type DepOutcomes struct {
	Succeeded, Failed, Skipped int
}

// Total is the number of dependencies counted.
func (d DepOutcomes) Total() int { return d.Succeeded + d.Failed + d.Skipped }

// Add counts one settled dependency in state s.
func (d *DepOutcomes) Add(s TaskState) {
	switch s {
	case TaskSucceeded:
		d.Succeeded++
	case TaskSkipped:
		d.Skipped++
	default:
		d.Failed++
	}
}

// Trigger is one trigger rule: when it lets a task run, given how its
// dependencies ended.
type Trigger struct {
	Name string
	Doc  string
	// NeedsDeps: the rule can never be met by a task without dependencies
	// (a spec problem).
	NeedsDeps bool
	Met       func(d DepOutcomes) bool
}

// Triggers is the trigger-rule table, the default first.
var Triggers = []Trigger{
	{TriggerAllSucceeded, "every dependency succeeded (the default)", false,
		func(d DepOutcomes) bool { return d.Succeeded == d.Total() }},
	{TriggerAllDone, "every dependency settled, whatever its outcome", false,
		func(DepOutcomes) bool { return true }},
	{TriggerOneFailed, "at least one dependency failed", true,
		func(d DepOutcomes) bool { return d.Failed > 0 }},
	{TriggerAllFailed, "every dependency failed", true,
		func(d DepOutcomes) bool { return d.Failed == d.Total() }},
	{TriggerOneSucceeded, "at least one dependency succeeded", true,
		func(d DepOutcomes) bool { return d.Succeeded > 0 }},
	{TriggerNoneFailed, "no dependency failed (succeeded or skipped)", false,
		func(d DepOutcomes) bool { return d.Failed == 0 }},
}

// TriggerOf returns the rule called name ("" is the default).
func TriggerOf(name string) (Trigger, bool) {
	if name == "" {
		return Triggers[0], true
	}
	for _, t := range Triggers {
		if t.Name == name {
			return t, true
		}
	}
	return Trigger{}, false
}

// SkipReason says why rule r was not met by d (for the task's error and its
// skip event).
func (r Trigger) SkipReason(d DepOutcomes) string {
	return fmt.Sprintf("skipped: trigger %s not met (dependencies: %d succeeded, %d failed, %d skipped)",
		r.Name, d.Succeeded, d.Failed, d.Skipped)
}

// UsesDecisions reports whether a spec has a trigger rule or a condition:
// its run is decided by the rules of this file (DeriveDecided).
func (s Spec) UsesDecisions() bool {
	for _, t := range s.Tasks {
		if t.When != "" || t.Trigger != "" {
			return true
		}
	}
	return false
}

// UsesSleep reports whether a spec has a sleep task (body or finally).
func (s Spec) UsesSleep() bool {
	for _, ts := range [][]TaskSpec{s.Tasks, s.Finally} {
		for _, t := range ts {
			if t.IsSleep() {
				return true
			}
		}
	}
	return false
}

// MaxWhenBytes bounds a when condition's source.
const MaxWhenBytes = 4096

// Spec problem codes of the decision fields.
const (
	CodeBadTrigger   = "bad_trigger"
	CodeBadCondition = "bad_condition"
)

func validateDecisions(t TaskSpec, path, prefix string) problems {
	var ps problems
	if prefix == "spawn" && (t.When != "" || t.Trigger != "") {
		if t.When != "" {
			ps.add(CodeBadCondition, path+".when", "a spawned task cannot have a when condition; put it on a task of the workflow")
		}
		if t.Trigger != "" {
			ps.add(CodeBadTrigger, path+".trigger", "a spawned task cannot have a trigger rule; put it on a task of the workflow")
		}
		return ps
	}
	if r, ok := TriggerOf(t.Trigger); !ok {
		names := make([]string, len(Triggers))
		for i, tr := range Triggers {
			names[i] = tr.Name
		}
		ps.add(CodeBadTrigger, path+".trigger", "trigger %q is not one of %q", t.Trigger, names)
	} else if r.NeedsDeps && len(t.Deps) == 0 {
		ps.add(CodeBadTrigger, path+".trigger", "trigger %s looks at the task's dependencies and it has none: add deps or drop the trigger", r.Name)
	}
	if len(t.When) > MaxWhenBytes {
		ps.add(CodeBadCondition, path+".when", "when condition of %d bytes exceeds the limit of %d", len(t.When), MaxWhenBytes)
	}
	return ps
}

// DeriveDecided is Derive for a run that uses trigger rules or conditions
// (Spec.UsesDecisions). A failed task does not end such a run at once: the
// tasks that do not depend on it go on, and its dependents are decided by
// their rules. Forward execution, by precedence:
//
//	cancelled > anything pending, ready, running or retrying (running; pending
//	while nothing started) > failed > all succeeded or skipped
//
// Reverting, final, settled and interrupted states derive as in Derive.
func DeriveDecided(current RunState, c TaskCounts) RunState {
	if current != RunPending && current != RunRunning {
		return Derive(current, c)
	}
	total := c.Total()
	active := c[TaskPending] + c[TaskReady] + c[TaskRunning] + c[TaskRetrying]
	switch {
	case total == 0:
		return current
	case c[TaskCancelled] > 0:
		return RunCancelled
	case c[TaskPending] == total:
		return current
	case active > 0:
		return RunRunning
	case c[TaskFailed] > 0:
		return RunFailed
	case c[TaskSucceeded]+c[TaskSkipped] == total:
		return RunSucceeded
	default:
		return RunRunning
	}
}
