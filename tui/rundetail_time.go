package tui

import (
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// taskDuration is a task's DURATION in the run detail: from its start to
// its end, or to now while it runs. A task that stopped without a
// finished_at (a running task whose run was reverted or cancelled: its
// attempt was revoked, it never finished) stops at the moment the
// timeline saw it leave running, else at the run's end; only when neither
// is known does it show "-" rather than keep counting.
func (m *runDetail) taskDuration(now time.Time, t *rpc.Task) string {
	if t.StartedAt.IsZero() || !t.FinishedAt.IsZero() || !stopped(t.State) {
		return span(now, t.StartedAt, t.FinishedAt)
	}
	end := m.leftRunning(t.Key)
	if end.IsZero() && m.run != nil {
		end = m.run.FinishedAt
	}
	if end.IsZero() {
		return "-"
	}
	return span(now, t.StartedAt, end)
}

// stopped: no attempt of the task runs any more (its own work is over,
// even while its compensation runs).
func stopped(s domain.TaskState) bool {
	return s.Done() || s == domain.TaskReverting
}

// leftRunning is when the timeline last saw task key leave running (zero:
// not seen).
func (m *runDetail) leftRunning(key string) time.Time {
	evs := m.timeline.evs
	for i := len(evs) - 1; i >= 0; i-- {
		if e := &evs[i]; e.Kind == "task" && e.TaskKey == key && e.From == string(domain.TaskRunning) {
			return e.At
		}
	}
	return time.Time{}
}
