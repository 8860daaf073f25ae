package domain

import "fmt"

// Loops over data (state-machine version 2): a task with for_each expands,
// when it would become ready (its dependencies allow it, its trigger rule
// and condition too), into one task per element of the list its
// expression gives — keys "<key>[0]", "<key>[1]", … in list order, the
// same type, queue and policies, the dependencies' results, and the input
// {"item": <element>, "index": i, "input": <the task's input>}. At most
// max_parallel of them are ready or running at a time (0: all at once),
// released in order. The task itself is not dispatched: it succeeds once
// every element task succeeded, with the list of their results in order
// as its result (what its dependents receive), and fails as soon as one
// fails for good (the elements not released are skipped). An expansion
// past the run's task limit fails the task, naming the limit.

// MaxParallelLimit bounds max_parallel.
const MaxParallelLimit = 10_000

// CodeBadLoop is the spec problem of the loop fields.
const CodeBadLoop = "bad_loop"

// LoopKey is the key of a loop's i-th element task.
func LoopKey(key string, i int) string { return fmt.Sprintf("%s[%d]", key, i) }

// LoopInput is an element task's input.
type LoopInput struct {
	Item  any `json:"item"`
	Index int `json:"index"`
	Input any `json:"input"`
}

// UsesLoops reports whether a spec has a for_each task.
func (s Spec) UsesLoops() bool {
	for _, t := range s.Tasks {
		if t.ForEach != "" {
			return true
		}
	}
	return false
}

func validateLoop(t TaskSpec, path, prefix string) problems {
	var ps problems
	if t.ForEach == "" {
		if t.MaxParallel != 0 {
			ps.add(CodeBadLoop, path+".max_parallel", "max_parallel caps a for_each loop: add for_each or drop it")
		}
		return ps
	}
	switch {
	case prefix != "tasks":
		ps.add(CodeBadLoop, path+".for_each", "only a task of the workflow's tasks can loop (not a finally or spawned task)")
	case t.Type == TypeWait || t.IsSleep():
		ps.add(CodeBadLoop, path+".for_each", "a %s task cannot loop", t.Type)
	case len(t.ForEach) > MaxWhenBytes:
		ps.add(CodeBadLoop, path+".for_each", "for_each of %d bytes exceeds the limit of %d", len(t.ForEach), MaxWhenBytes)
	}
	if t.MaxParallel < 0 || t.MaxParallel > MaxParallelLimit {
		ps.add(CodeBadLoop, path+".max_parallel", "max_parallel %d must be between 1 and %d (0: no cap)", t.MaxParallel, MaxParallelLimit)
	}
	return ps
}
