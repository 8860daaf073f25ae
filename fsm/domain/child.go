package domain

// Child runs (state-machine version 2): a task of type run with a
// definition starts a run of that stored definition — in the same entry in
// which the task becomes ready — with the task's input as the child's
// input, linked both ways (the child's parent_id, the parent's children).
// No worker claims the task: it succeeds when the child run succeeds, its
// result the outputs of the child's final tasks (those no task depends
// on) by key, and fails when the child run fails, is cancelled or is
// reverted. Cancelling, interrupting or resuming the parent does the same
// to its running children. Runs nest at most MaxChildDepth deep; each
// child run has the run-size limits of any run.

// TypeRun is the reserved task type of a child run (with a definition).
const TypeRun = "run"

// MaxChildDepth bounds how deep child runs nest (a run started by a task
// of a run started by a task ...).
const MaxChildDepth = 8

// CodeBadChild is the spec problem of a child-run task.
const CodeBadChild = "bad_child_run"

// IsRunTask reports whether the task starts a child run: type run with a
// definition. Type run without one is an ordinary worker type, as before
// version 2.
func (t TaskSpec) IsRunTask() bool { return t.Type == TypeRun && t.Definition != "" }

// UsesChildRuns reports whether a spec has a task that starts a child run.
func (s Spec) UsesChildRuns() bool {
	for _, ts := range [][]TaskSpec{s.Tasks, s.Finally} {
		for _, t := range ts {
			if t.IsRunTask() {
				return true
			}
		}
	}
	return false
}

func validateChild(t TaskSpec, path, prefix string, lim Limits) problems {
	var ps problems
	switch {
	case t.Definition == "":
	case t.Type != TypeRun:
		ps.add(CodeBadChild, path+".definition", "only a task of type %q starts a child run; set type to %q or drop definition", TypeRun, TypeRun)
	case prefix == "spawn":
		ps.add(CodeBadChild, path+".definition", "a spawned task cannot start a child run")
	case t.ForEach != "":
		ps.add(CodeBadChild, path+".for_each", "a child-run task cannot loop")
	default:
		if _, _, err := ParseDefinitionRef(t.Definition, lim); err != nil {
			ps.add(CodeBadChild, path+".definition", "definition %q: %v", t.Definition, err)
		}
	}
	return ps
}
