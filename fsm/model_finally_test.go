package fsm

import (
	"fmt"

	"github.com/flowd/flowd/fsm/domain"
	"pgregory.net/rapid"
)

// The model's finally tasks (V2, apply_finally.go): held until the body
// (the other tasks) reaches an outcome by its own precedence; then, or
// after a revert the failure started, they are promoted (decided by the
// default trigger rule, like tasks with rules), dispatchable even while
// the run is reverting; once they all settled the run takes the body's
// outcome.

type mFinally struct {
	finStarted bool
	finOutcome domain.RunState
}

func (r *mRun) hasFinally() bool {
	for _, t := range r.tasks {
		if t.finally {
			return true
		}
	}
	return false
}

// executing: forward tasks of r may progress.
func (m *model) executing(r *mRun) bool {
	return r.state == domain.RunRunning || r.state == domain.RunInterrupted || r.state == domain.RunReverting && r.finStarted
}

// drawFinally gives a spec up to two finally tasks, the second maybe
// depending on the first.
func drawFinally(rt *rapid.T, spec *domain.Spec) {
	n := rapid.IntRange(0, 2).Draw(rt, "finally")
	if n == 0 || rapid.Bool().Draw(rt, "no_finally") {
		return
	}
	for i := 0; i < n; i++ {
		ts := domain.TaskSpec{Key: fmt.Sprintf("f%d", i), Type: rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "fin_type"),
			LeaseMS: rapid.SampledFrom([]int64{100, 1000}).Draw(rt, "fin_lease"),
			Retry:   &domain.RetryPolicy{MaxAttempts: rapid.IntRange(1, 2).Draw(rt, "fin_attempts"), InitialBackoffMS: 10}}
		if i == 1 && rapid.Bool().Draw(rt, "fin_dep") {
			ts.Deps = []string{"f0"}
		}
		spec.Finally = append(spec.Finally, ts)
	}
}

// deriveFinally mirrors apply_finally.go's derivation; false: derive as
// usual.
func (m *model) deriveFinally(r *mRun) bool {
	if r.state != domain.RunRunning && r.state != domain.RunReverting {
		return false
	}
	if r.finStarted {
		for _, t := range r.tasks {
			if t.finally {
				switch t.state {
				case domain.TaskPending, domain.TaskReady, domain.TaskRunning, domain.TaskRetrying:
					return true
				}
			}
		}
		r.state = r.finOutcome
		return true
	}
	count, n := map[domain.TaskState]int{}, 0
	for _, t := range r.tasks {
		if !t.finally {
			count[t.state]++
			n++
		}
	}
	var next domain.RunState
	switch {
	case r.state == domain.RunReverting:
		switch {
		case count[domain.TaskReverting] > 0:
			return true
		case count[domain.TaskFailed] > 0:
			next = domain.RunFailed
		default:
			next = domain.RunReverted
		}
	case r.decided:
		switch {
		case count[domain.TaskPending]+count[domain.TaskReady]+count[domain.TaskRunning]+count[domain.TaskRetrying] > 0:
			return true
		case count[domain.TaskFailed] > 0:
			next = domain.RunFailed
		default:
			next = domain.RunSucceeded
		}
	default:
		switch {
		case count[domain.TaskFailed] > 0:
			next = domain.RunFailed
		case count[domain.TaskSucceeded]+count[domain.TaskSkipped] == n:
			next = domain.RunSucceeded
		default:
			return true
		}
	}
	if next == domain.RunFailed && r.state == domain.RunRunning && r.revert {
		m.startRevert(r)
		return true
	}
	r.finStarted, r.finOutcome = true, next
	if next == domain.RunFailed {
		for _, t := range r.tasks {
			if !t.finally {
				m.cancelWaiting(t)
			}
		}
		m.propagate(r, MsgCancelRun) // model_child_test.go
	}
	m.promote(r)
	return true
}
