package daemon

import (
	"log/slog"
	"sync"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
)

// Two rare events leave a client waiting with nothing on the agents to say
// why, so they are logged (at WARN, at most one line a second each, with a
// count of the lines left out, so an outage cannot flood the log):
//
//   - a call answered -32004 only after a long wait (slowCalls): a write
//     that waited out its budget, a forward that never reached a leader.
//     Its client saw seconds of nothing, then retried; a fast -32004 (an
//     election, a refusal) is expected and only counted
//     (flowd_rpc_requests_total{code="-32004"});
//   - a lease that expired before its worker acknowledged it (orphanLeases,
//     on the leader): the claim's answer never reached the worker, or the
//     worker stalled or stopped before its first heartbeat or completion. The task came back without spending an attempt,
//     but only after its whole lease, which its submitter saw as latency.
//
// Both were prompted by one job of a paced benchmark pass acknowledged
// 30 s late after three retried calls, which neither explained: 30 s is
// the default lease and also three 10 s write budgets.

// slowUnavailableAfter is how long a call must have waited before a -32004
// answer is logged: a write's budget is 10 s, a forward gives up when its
// caller's deadline passes, so an answer this late means the call waited
// out most of its budget with no leader answering it.
const slowUnavailableAfter = 5 * time.Second

// rateLog lets one line through a second and counts the rest.
type rateLog struct {
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	last    time.Time
	skipped int
}

// allow reports whether a line may be logged now, and how many were left
// out since the last one.
func (r *rateLog) allow() (skipped int, ok bool) {
	if r.log == nil {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if !r.last.IsZero() && now.Sub(r.last) < time.Second {
		r.skipped++
		return 0, false
	}
	skipped = r.skipped
	r.last, r.skipped = now, 0
	return skipped, true
}

type slowCalls struct {
	rateLog
	after time.Duration
}

func newSlowCalls(log *slog.Logger) *slowCalls {
	return &slowCalls{rateLog: rateLog{log: log, now: time.Now}, after: slowUnavailableAfter}
}

// unavailable records that method was answered err, a -32004, after waited.
func (s *slowCalls) unavailable(method string, waited time.Duration, err error) {
	if s == nil || waited < s.after {
		return
	}
	if skipped, ok := s.allow(); ok {
		s.log.Warn("a call was answered unavailable (-32004) only after a long wait; its client retries it, and until then a write's outcome is unknown: check that a leader is elected and reachable from this agent (flowd status, flowd operator raft list-peers)",
			"method", method, "waited", waited.Round(time.Millisecond), "reason", err.Error(), "more_since_last_line", skipped)
	}
}

type orphanLeases struct {
	rateLog
	leader func() bool
}

func newOrphanLeases(log *slog.Logger, leader func() bool) *orphanLeases {
	return &orphanLeases{rateLog: rateLog{log: log, now: time.Now}, leader: leader}
}

// observe is a commit hook: it logs the leases the commit returned because
// their workers never acknowledged them (fsm returnUnacked). Leadership is
// asked only when a commit holds one, not on every commit.
func (o *orphanLeases) observe(evs []fsm.Event) {
	if o == nil {
		return
	}
	for i := range evs {
		ev := &evs[i]
		if ev.Transition != domain.EdgeReapLease || ev.Error != fsm.OutcomeLeaseUnacked {
			continue
		}
		if !o.leader() {
			return
		}
		if skipped, ok := o.allow(); ok {
			o.log.Warn("a lease expired before its worker acknowledged the claim: the claim's answer did not reach the worker, or the worker stalled or stopped before its first heartbeat or completion; the task is ready again without spending an attempt, after waiting out its lease",
				"task", ev.RunID+"/"+ev.TaskKey, "worker", ev.Worker, "attempt", ev.Attempt, "index", ev.Index, "more_since_last_line", skipped)
		}
	}
}
