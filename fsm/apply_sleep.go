package fsm

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// Durable timers (V2; domain/sleep.go). A sleep task's timer is its rules
// record's entry (the Task record's layout stays V1's); when the task
// becomes ready its DueAt is set, which puts it in the wake-up index, and
// the leader's Tick at that time wakes it: one more timer of the loop that
// fires wait tasks' timeouts and runs' deadlines.

// sleepRule is one sleep task's timer: a duration from readiness, or an
// instant (Unix ms).
type sleepRule struct {
	DurationMS int64 `json:"duration_ms,omitempty"`
	UntilMS    int64 `json:"until_ms,omitempty"`
}

// isSleep reports whether t is a sleep task (no worker claims it): type
// sleep with a timer in its run's rules (a task of type sleep without one
// is a worker's, as before V2).
func (a *applier) isSleep(t *Task) bool {
	if t.Type != domain.TypeSleep {
		return false
	}
	rr := a.rulesFor(t.RunID)
	if rr == nil {
		return false
	}
	_, ok := rr.Sleeps[t.Key]
	return ok
}

// armSleep starts a sleep task that just became ready: an attempt (its
// token names it to a signal), and its timer.
func (a *applier) armSleep(t *Task) {
	t.Attempt++
	if t.StartedAt == 0 {
		t.StartedAt = a.now
	}
	t.FencingToken = a.index
	var at int64
	if rr := a.rulesFor(t.RunID); rr != nil {
		s := rr.Sleeps[t.Key]
		at = s.UntilMS
		if s.DurationMS > 0 {
			at = a.now + s.DurationMS
		}
	}
	a.setDue(t, max(at, a.now))
}

// wakeSleep completes a sleep task whose time came.
func (a *applier) wakeSleep(r *Run, t *Task) int {
	res, err := json.Marshal(map[string]string{"woke_at": time.UnixMilli(a.now).UTC().Format(time.RFC3339Nano)})
	must(err)
	t.Result, t.Error, t.FinishedAt = res, "", a.now
	a.stepTask(r, t, domain.EdgeWake, func(e *Event) { e.Error = fmt.Sprintf("slept %d ms", a.now-t.ReadyAt) })
	a.getCounters().TasksDone++
	if a.executing(r) {
		for _, d := range t.Dependents {
			a.advance(r, a.loadTask(r.ID, d))
		}
	}
	a.derive(r)
	return 1
}
