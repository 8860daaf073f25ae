package domain

import "encoding/json"

// Child runs (state-machine version 2): a task of type run with a
// definition (or an inline spec, frozen in the parent's) starts a run of that stored definition — in the same entry in
// which the task becomes ready — with the task's input as the child's
// input (or the value of the task's input expression, ChildInputExpr), linked both ways (the child's parent_id, the parent's children).
// No worker claims the task: it succeeds when the child run succeeds, its
// result the outputs of the child's final tasks (those no task depends
// on) by key, and fails when the child run fails, is cancelled or is
// reverted. Cancelling, interrupting or resuming the parent does the same
// to its running children (one started while the parent is interrupted
// starts interrupted). Runs nest at most MaxChildDepth deep; each
// child run has the run-size limits of any run.

// TypeRun is the reserved task type of a child run (with a definition).
const TypeRun = "run"

// MaxChildDepth bounds how deep child runs nest (a run started by a task
// of a run started by a task ...).
const MaxChildDepth = 8

// CodeBadChild is the spec problem of a child-run task.
const CodeBadChild = "bad_child_run"

// IsRunTask reports whether the task starts a child run: type run with a
// definition or an inline spec. Type run without either is an ordinary
// worker type, as before version 2.
func (t TaskSpec) IsRunTask() bool { return t.Type == TypeRun && (t.Definition != "" || t.Spec != nil) }

// ChildInputExpr is the CEL expression (fsm/expr) that computes a run
// task's child input: its input when that is a JSON string ("" otherwise:
// the input, an object, list, number or bool, is the child's as it is).
// The expression sees the parent's input, its labels and the task's
// dependencies, as a when condition does.
func (t TaskSpec) ChildInputExpr() string {
	if !t.IsRunTask() {
		return ""
	}
	return InputExpr(t.Input)
}

// InputExpr is a run task's input expression given its input: the string
// it is, or "".
func InputExpr(input json.RawMessage) string {
	if len(input) == 0 || input[0] != '"' {
		return ""
	}
	var src string
	if json.Unmarshal(input, &src) != nil {
		return ""
	}
	return src
}

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
	field := ".definition"
	if t.Spec != nil {
		field = ".spec"
	}
	switch {
	case t.Definition == "" && t.Spec == nil:
	case t.Type != TypeRun:
		ps.add(CodeBadChild, path+field, "only a task of type %q starts a child run; set type to %q or drop %s", TypeRun, TypeRun, field[1:])
	case prefix == "spawn":
		ps.add(CodeBadChild, path+field, "a spawned task cannot start a child run")
	case t.ForEach != "":
		ps.add(CodeBadChild, path+".for_each", "a child-run task cannot loop")
	case t.Definition != "" && t.Spec != nil:
		ps.add(CodeBadChild, path+".spec", "a child run is a stored definition or an inline spec, not both; drop definition or spec")
	case t.Spec != nil:
		// The inline spec is validated as a submitted one, its problems
		// under this task's path.
		for _, p := range validateSpec(*t.Spec, lim) {
			p.Path = path + ".spec." + p.Path
			ps = append(ps, p)
		}
	default:
		if _, _, err := ParseDefinitionRef(t.Definition, lim); err != nil {
			ps.add(CodeBadChild, path+".definition", "definition %q: %v", t.Definition, err)
		}
	}
	return ps
}
