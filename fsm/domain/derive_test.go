package domain

import (
	"testing"

	"pgregory.net/rapid"
)

type ts = []TaskState

func TestDeriveTable(t *testing.T) {
	cases := []struct {
		name    string
		current RunState
		tasks   ts
		want    RunState
	}{
		// Forward: cancelled > failed > all succeeded > any started > pending.
		{"empty pending run stays pending", RunPending, nil, RunPending},
		{"empty list is not a success", RunPending, ts{}, RunPending},
		{"all pending", RunPending, ts{TaskPending, TaskPending}, RunPending},
		{"admitted: a root is ready", RunPending, ts{TaskReady, TaskPending}, RunRunning},
		{"running task", RunRunning, ts{TaskRunning, TaskPending}, RunRunning},
		{"retrying counts as started", RunRunning, ts{TaskRetrying, TaskPending}, RunRunning},
		{"some succeeded", RunRunning, ts{TaskSucceeded, TaskPending}, RunRunning},
		{"all succeeded", RunRunning, ts{TaskSucceeded, TaskSucceeded}, RunSucceeded},
		{"one succeeded", RunRunning, ts{TaskSucceeded}, RunSucceeded},
		{"failed beats running", RunRunning, ts{TaskFailed, TaskRunning, TaskSucceeded}, RunFailed},
		{"failed beats all-but-one succeeded", RunRunning, ts{TaskSucceeded, TaskFailed}, RunFailed},
		{"cancelled beats failed", RunRunning, ts{TaskFailed, TaskCancelled, TaskSucceeded}, RunCancelled},
		{"cancelled beats everything", RunRunning, ts{TaskCancelled, TaskPending, TaskRunning}, RunCancelled},
		{"cancelled from pending", RunPending, ts{TaskCancelled, TaskPending}, RunCancelled},
		{"all reused while pending", RunPending, ts{TaskSucceeded, TaskSucceeded}, RunSucceeded},
		{"reverting task in forward mode counts as started", RunRunning, ts{TaskReverting, TaskPending}, RunRunning},
		// A running run never goes back to pending (no running -> pending edge).
		{"running run, nothing started", RunRunning, ts{TaskPending, TaskPending}, RunRunning},
		{"running run, no tasks", RunRunning, nil, RunRunning},

		// Reverting: any reverting > any failed > reverted.
		{"reverting task keeps reverting", RunReverting, ts{TaskReverting, TaskReverted, TaskFailed}, RunReverting},
		{"compensation failed", RunReverting, ts{TaskReverted, TaskFailed}, RunFailed},
		{"all reverted", RunReverting, ts{TaskReverted, TaskReverted}, RunReverted},
		{"reverted and cancelled", RunReverting, ts{TaskReverted, TaskCancelled}, RunReverted},
		{"nothing to revert", RunReverting, nil, RunReverted},
		{"cancelled compensation", RunReverting, ts{TaskCancelled}, RunReverted},

		// Final, settled and interrupted never change by derivation.
		{"succeeded is final", RunSucceeded, ts{TaskFailed, TaskCancelled}, RunSucceeded},
		{"cancelled is final", RunCancelled, ts{TaskSucceeded}, RunCancelled},
		{"reverted is final", RunReverted, ts{TaskReverting}, RunReverted},
		{"failed is settled", RunFailed, ts{TaskSucceeded, TaskSucceeded}, RunFailed},
		{"failed ignores reverted tasks", RunFailed, ts{TaskReverted}, RunFailed},
		{"interrupted stays", RunInterrupted, ts{TaskSucceeded}, RunInterrupted},
		{"interrupted stays (cancelled task)", RunInterrupted, ts{TaskCancelled}, RunInterrupted},
		{"unknown state is left alone", RunState("bogus"), ts{TaskSucceeded}, RunState("bogus")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := DeriveRunState(c.current, c.tasks); got != c.want {
				t.Errorf("DeriveRunState(%s, %v) = %s, want %s", c.current, c.tasks, got, c.want)
			}
			if got := Derive(c.current, CountTasks(c.tasks)); got != c.want {
				t.Errorf("Derive(%s, counts of %v) = %s, want %s", c.current, c.tasks, got, c.want)
			}
		})
	}
}

func TestCountTasks(t *testing.T) {
	c := CountTasks(ts{TaskPending, TaskRunning, TaskPending, TaskFailed})
	if c[TaskPending] != 2 || c[TaskRunning] != 1 || c[TaskFailed] != 1 || c.Total() != 4 || len(c) != 3 {
		t.Errorf("CountTasks = %v (total %d)", c, c.Total())
	}
	if n := CountTasks(nil).Total(); n != 0 {
		t.Errorf("empty total = %d", n)
	}
	// Derive takes counts as kept by the FSM: zero entries must not matter.
	withZeros := TaskCounts{TaskSucceeded: 2, TaskFailed: 0, TaskCancelled: 0, TaskPending: 0}
	if got := Derive(RunRunning, withZeros); got != RunSucceeded {
		t.Errorf("Derive with zero entries = %s", got)
	}
	if got := Derive(RunRunning, nil); got != RunRunning {
		t.Errorf("Derive(running, nil counts) = %s", got)
	}
}

// Generators.

func genTaskState() *rapid.Generator[TaskState] { return rapid.SampledFrom(TaskStates) }

func genTasks() *rapid.Generator[[]TaskState] {
	return rapid.SliceOfN(genTaskState(), 0, 12)
}

func genForwardRun() *rapid.Generator[RunState] {
	return rapid.SampledFrom([]RunState{RunPending, RunRunning})
}

// referenceDerive is an independent statement of the derivation rules,
// written as a scan over the list rather than over counts.
func referenceDerive(current RunState, tasks []TaskState) RunState {
	switch current {
	case RunPending, RunRunning:
		anyCancelled, anyFailed, allSucceeded, anyStarted := false, false, true, false
		for _, s := range tasks {
			switch s {
			case TaskCancelled:
				anyCancelled = true
			case TaskFailed:
				anyFailed = true
			}
			if s != TaskSucceeded && s != TaskSkipped {
				allSucceeded = false
			}
			if s != TaskPending {
				anyStarted = true
			}
		}
		switch {
		case len(tasks) == 0:
			return current // pending stays pending; running never goes back
		case anyCancelled:
			return RunCancelled
		case anyFailed:
			return RunFailed
		case allSucceeded:
			return RunSucceeded
		case anyStarted:
			return RunRunning
		default:
			return current
		}
	case RunReverting:
		anyFailed := false
		for _, s := range tasks {
			if s == TaskReverting {
				return RunReverting
			}
			anyFailed = anyFailed || s == TaskFailed
		}
		if anyFailed {
			return RunFailed
		}
		return RunReverted
	default:
		return current
	}
}

func TestDeriveMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		current := genForwardRun().Draw(t, "current")
		tasks := genTasks().Draw(t, "tasks")
		if got, want := DeriveRunState(current, tasks), referenceDerive(current, tasks); got != want {
			t.Fatalf("DeriveRunState(%s, %v) = %s, reference says %s", current, tasks, got, want)
		}
	})
}

func TestDeriveMatchesReferenceAnyState(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		current := rapid.SampledFrom(RunStates).Draw(t, "current")
		tasks := genTasks().Draw(t, "tasks")
		if got, want := DeriveRunState(current, tasks), referenceDerive(current, tasks); got != want {
			t.Fatalf("DeriveRunState(%s, %v) = %s, reference says %s", current, tasks, got, want)
		}
	})
}

func TestDerivePermutationInvariant(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		current := rapid.SampledFrom(RunStates).Draw(t, "current")
		tasks := genTasks().Draw(t, "tasks")
		perm := rapid.Permutation(tasks).Draw(t, "perm")
		if a, b := DeriveRunState(current, tasks), DeriveRunState(current, perm); a != b {
			t.Fatalf("Derive(%s, %v) = %s but Derive(%s, %v) = %s", current, tasks, a, current, perm, b)
		}
	})
}

// TestDeriveForwardIsReachable: whatever forward derivation decides must be
// something the run machine can do, since the FSM takes EdgeBetween(current,
// derived). The exact truth:
//   - from running, the result is running itself or one edge away
//     (succeed, fail, cancel);
//   - from pending, the result is pending, running (start) or cancelled
//     (cancel_before_start); succeeded or failed (tasks finished while the
//     run was never started, e.g. reused results) are not one edge away but
//     are reached through start then succeed/fail.
func TestDeriveForwardIsReachable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		current := genForwardRun().Draw(t, "current")
		tasks := genTasks().Draw(t, "tasks")
		next := DeriveRunState(current, tasks)
		if next == current {
			return
		}
		if _, ok := RunMachine.EdgeBetween(current, next); ok {
			return
		}
		if current == RunPending && (next == RunSucceeded || next == RunFailed) {
			via, ok := RunMachine.EdgeBetween(RunRunning, next)
			if !ok {
				t.Fatalf("pending -> %s: not reachable through running either", next)
			}
			if _, err := RunMachine.Step(RunPending, EdgeStart); err != nil || !RunMachine.Can(RunRunning, via) {
				t.Fatalf("pending -> start -> %s failed", via)
			}
			return
		}
		t.Fatalf("Derive(%s, %v) = %s, which no edge reaches", current, tasks, next)
	})
}

// TestDeriveRevertingIsReachable: the reverting outcomes are all one edge away.
func TestDeriveRevertingIsReachable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tasks := genTasks().Draw(t, "tasks")
		next := DeriveRunState(RunReverting, tasks)
		if next == RunReverting {
			return
		}
		if _, ok := RunMachine.EdgeBetween(RunReverting, next); !ok {
			t.Fatalf("Derive(reverting, %v) = %s, which no edge reaches", tasks, next)
		}
	})
}

func TestDeriveCancelledTaskCancelsForwardRun(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		current := genForwardRun().Draw(t, "current")
		tasks := genTasks().Draw(t, "tasks")
		at := rapid.IntRange(0, len(tasks)).Draw(t, "at")
		withCancel := append(append(append(ts{}, tasks[:at]...), TaskCancelled), tasks[at:]...)
		if got := DeriveRunState(current, withCancel); got != RunCancelled {
			t.Fatalf("Derive(%s, %v) = %s, want cancelled", current, withCancel, got)
		}
	})
}

func TestDeriveNeverLeavesStableStates(t *testing.T) {
	stable := []RunState{RunSucceeded, RunFailed, RunCancelled, RunReverted, RunInterrupted}
	rapid.Check(t, func(t *rapid.T) {
		current := rapid.SampledFrom(stable).Draw(t, "current")
		tasks := genTasks().Draw(t, "tasks")
		if got := DeriveRunState(current, tasks); got != current {
			t.Fatalf("Derive(%s, %v) = %s: derivation left a stable state", current, tasks, got)
		}
	})
}

// TestDeriveIsAFixpoint: deriving again from the derived state, with the same
// tasks, changes nothing, so the FSM never takes two edges for one change.
func TestDeriveIsAFixpoint(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		current := rapid.SampledFrom(RunStates).Draw(t, "current")
		tasks := genTasks().Draw(t, "tasks")
		once := DeriveRunState(current, tasks)
		if twice := DeriveRunState(once, tasks); twice != once {
			t.Fatalf("Derive(%s, %v) = %s, then %s", current, tasks, once, twice)
		}
	})
}
