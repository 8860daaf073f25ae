package fsm

import (
	"encoding/json"
	"fmt"

	"github.com/flowd/flowd/fsm/domain"
	"pgregory.net/rapid"
)

// The model's timeouts and wait tasks: a forward attempt's timeout_ms caps
// its lease and ends it (a late write is rejected and times the attempt out
// in that entry); a wait task is never dispatched, counts an attempt when
// it starts waiting, holds the entry's index as its token, and a signal
// completes it.

type mTimes struct {
	timeoutMS, timeoutAt int64
	wait                 bool
	signalID             string
}

// drawTimes gives a task spec a timeout_ms, or makes it a wait task.
func drawTimes(rt *rapid.T, ts *domain.TaskSpec) {
	switch rapid.IntRange(0, 5).Draw(rt, "times") {
	case 0:
		ts.TimeoutMS = rapid.SampledFrom([]int64{50, 300, 2500}).Draw(rt, "timeout_ms")
	case 1:
		ts.Type = domain.TypeWait
	}
}

// startWait: a wait task that became ready starts waiting.
func (m *model) startWait(t *mTask) {
	if t.wait {
		t.attempt++
		t.token = m.h.index
	}
}

func (m *model) armTimeout(t *mTask, comp bool) {
	if !comp && t.timeoutMS > 0 {
		t.timeoutAt = m.now() + t.timeoutMS
		t.leaseExp = min(t.leaseExp, t.timeoutAt)
	}
}

func (m *model) leaseEnd(t *mTask) int64 {
	end := m.now() + t.leaseMS
	if t.timeoutAt != 0 {
		end = min(end, t.timeoutAt)
	}
	return end
}

// expiryOutcome is the outcome of a spent attempt at reap time.
func (m *model) expiryOutcome(t *mTask) string {
	if t.state == domain.TaskRunning && t.timeoutAt != 0 && t.timeoutAt <= m.now() {
		return OutcomeTimedOut
	}
	return OutcomeLeaseExpired
}

// late sends cmd (a write with t's live token) if t's attempt is past its
// timeout: the write is rejected and the attempt times out (acknowledged
// by the write itself). It reports whether it did.
func (m *model) late(rt *rapid.T, t *mTask, cmd Command) bool {
	if t.state != domain.TaskRunning || t.timeoutAt == 0 || m.now() < t.timeoutAt {
		return false
	}
	if m.h.ok(cmd).(*AckResult).Accepted {
		rt.Fatalf("%s of %s past its timeout accepted", cmd.Type(), t.id())
	}
	m.ack(t)
	m.endLease(t, OutcomeTimedOut)
	m.failAttempt(t, true)
	return true
}

// signal completes a wait task (or loses the race when it is not waiting);
// a re-sent signal id is accepted again and changes nothing.
func (m *model) signal(rt *rapid.T) {
	var waits []*mTask
	for _, t := range m.all() {
		if t.wait {
			waits = append(waits, t)
		}
	}
	if len(waits) == 0 {
		rt.Skip("no wait tasks")
	}
	t := rapid.SampledFrom(waits).Draw(rt, "wait")
	id := fmt.Sprintf("sig-%d", m.h.index)
	if t.signalID != "" && rapid.Bool().Draw(rt, "resend") {
		id = t.signalID
	}
	payload := json.RawMessage(fmt.Sprintf(`{"signal":%q}`, id))
	before := m.digestNoClock()
	res := m.h.ok(&TaskSignal{TaskID: t.id(), Payload: payload, SignalID: id}).(*SignalResult)
	switch {
	case id == t.signalID:
		if !res.Accepted || m.digestNoClock() != before {
			rt.Fatalf("re-sent signal %s to %s: %+v (or it changed state)", id, t.id(), res)
		}
	case t.state == domain.TaskReady:
		if !res.Accepted {
			rt.Fatalf("signal to waiting %s rejected: %+v", t.id(), res)
		}
		t.state, t.result, t.signalID = domain.TaskSucceeded, payload, id
		if m.executing(t.run) {
			m.promote(t.run)
		}
		m.derive(t.run)
	default:
		if res.Accepted || m.digestNoClock() != before {
			rt.Fatalf("signal to %s %s: %+v (or it changed state)", t.state, t.id(), res)
		}
	}
}
