package fsm

import (
	"fmt"

	"github.com/flowd/flowd/fsm/domain"
	"pgregory.net/rapid"
)

// The model's trigger rules and when conditions (V2, apply_decide.go). A
// drawn task may have a rule (any of the table's) and a condition the
// model evaluates itself: a constant, a dependency's state, or one that
// fails to evaluate (the run has no input). Decided runs promote, skip and
// fail tasks by the rules, and derive by DeriveDecided's precedence,
// written here as a scan.

func drawDecision(rt *rapid.T, ts *domain.TaskSpec) {
	if rapid.IntRange(0, 2).Draw(rt, "rule?") == 0 {
		var names []string
		for _, tr := range domain.Triggers {
			if !tr.NeedsDeps || len(ts.Deps) > 0 {
				names = append(names, tr.Name)
			}
		}
		ts.Trigger = rapid.SampledFrom(names).Draw(rt, "trigger")
	}
	whens := []string{"", "", "true", "false", "input.missing == 1"}
	for _, d := range ts.Deps {
		whens = append(whens, fmt.Sprintf("deps.%s.state == 'succeeded'", d))
	}
	ts.When = rapid.SampledFrom(whens).Draw(rt, "when")
}

// evalWhen is the model's reading of the drawn conditions: ok, or an
// evaluation error.
func (m *model) evalWhen(r *mRun, when string) (ok, failed bool) {
	switch when {
	case "", "true":
		return true, false
	case "false":
		return false, false
	case "input.missing == 1":
		return false, true
	}
	var d string
	if _, err := fmt.Sscanf(when, "deps.%s", &d); err == nil {
		key := d[:len(d)-len(".state")]
		return r.byKey[key].state == domain.TaskSucceeded, false
	}
	panic("model: unknown condition " + when)
}

// decide settles or promotes every pending task whose dependencies all
// settled, until nothing changes (a skip or a failure decides dependents).
func (m *model) decide(r *mRun) {
	for changed := true; changed; {
		changed = false
		for _, t := range r.tasks {
			if t.state != domain.TaskPending || t.finally && !r.finStarted || !r.decided && !t.finally {
				continue
			}
			var out domain.DepOutcomes
			settled := true
			for _, d := range t.deps {
				s := r.byKey[d].state
				switch s {
				case domain.TaskSucceeded, domain.TaskSkipped, domain.TaskFailed, domain.TaskCancelled, domain.TaskReverted:
					out.Add(s)
				default:
					settled = false
				}
			}
			if !settled {
				continue
			}
			changed = true
			tr, _ := domain.TriggerOf(t.trigger)
			if !tr.Met(out) {
				t.state = domain.TaskSkipped
				continue
			}
			switch ok, failed := m.evalWhen(r, t.when); {
			case failed:
				t.state = domain.TaskFailed
			case !ok:
				t.state = domain.TaskSkipped
			default:
				t.state = domain.TaskReady
				m.armReady(t)
			}
		}
	}
}

// deriveDecided: a decided run goes on while any task is pending, ready,
// running or retrying; then it fails (or reverts) if one failed, and
// succeeds otherwise.
func (m *model) deriveDecided(r *mRun, count map[domain.TaskState]int) {
	if count[domain.TaskPending]+count[domain.TaskReady]+count[domain.TaskRunning]+count[domain.TaskRetrying] > 0 {
		return
	}
	switch {
	case count[domain.TaskFailed] > 0 && r.revert:
		m.startRevert(r)
	case count[domain.TaskFailed] > 0:
		r.state = domain.RunFailed
	default:
		r.state = domain.RunSucceeded
	}
}
