package fsm

import (
	"errors"
	"slices"

	"github.com/flowd/flowd/fsm/domain"
	"pgregory.net/rapid"
)

// The model's run.retry (V2, apply_retry.go): a failed or cancelled run
// whose tasks were never reverted goes back to running; its failed,
// cancelled and (in a decided run) skipped tasks go back to pending, the
// attempts they made stop counting against their policy, and pending
// tasks are promoted or decided again. Anything else is refused and
// changes nothing.
func (m *model) retryRun(rt *rapid.T) {
	if len(m.runs) == 0 {
		rt.Skip("no runs")
	}
	r := rapid.SampledFrom(m.runs).Draw(rt, "run")
	var reset []*mTask
	ok := r.state == domain.RunFailed || r.state == domain.RunCancelled
	for _, t := range r.tasks {
		switch {
		case t.state == domain.TaskReverted || t.comp != "":
			ok = false
		case t.finally:
			if t.state != domain.TaskPending && t.state != domain.TaskReady && t.state != domain.TaskRunning && t.state != domain.TaskRetrying {
				reset = append(reset, t) // finally tasks run again after the retried body
			}
		case t.state == domain.TaskFailed, t.state == domain.TaskCancelled, t.state == domain.TaskSkipped && r.decided:
			reset = append(reset, t)
		}
	}
	ok = ok && len(reset) > 0
	before := m.digestNoClock()
	res := m.h.apply(&RunRetry{ID: r.id})
	if !ok {
		if err, isErr := res.(error); !isErr || !errors.Is(err, ErrInvalidArgument) || m.digestNoClock() != before {
			rt.Fatalf("retry of %s run %s: %v, want a refusal that changes nothing", r.state, r.id, res)
		}
		return
	}
	got, isRes := res.(*RetryResult)
	if !isRes {
		rt.Fatalf("retry of %s run %s: %v", r.state, r.id, res)
	}
	var keys []string
	for _, t := range reset {
		keys = append(keys, t.key)
		if t.attempt > 0 {
			t.base = t.attempt
		}
		t.state, t.retryAt = domain.TaskPending, 0
	}
	if !slices.Equal(got.Tasks, keys) {
		rt.Fatalf("retry of %s reset %v, model says %v", r.id, got.Tasks, keys)
	}
	r.state = domain.RunRunning
	r.finStarted, r.finOutcome = false, ""
	m.promote(r)
	m.derive(r)
}
