package daemon

import (
	"log/slog"
	"sync"
	"time"
)

// slowUnavailableAfter is how long a call must have waited before a -32004
// answer is logged (slowCalls): a write's budget is 10 s, a forward gives
// up when its caller's deadline passes, so an answer this late means the
// call waited out most of its budget with no leader answering it.
const slowUnavailableAfter = 5 * time.Second

// slowCalls logs the calls answered -32004 (unavailable, outcome unknown)
// only after a long wait: a write that waited out its budget, a forward
// that never reached a leader. A fast -32004 is an election or a refused
// call and says nothing new, and both are counted anyway
// (flowd_rpc_requests_total{code="-32004"}); a late one is the only trace
// of a call that hung, which its client sees as seconds of nothing and then
// a retry. At most one line a second, carrying how many were left out, so
// an outage does not flood the log.
type slowCalls struct {
	log   *slog.Logger
	after time.Duration
	now   func() time.Time

	mu      sync.Mutex
	last    time.Time
	skipped int
}

func newSlowCalls(log *slog.Logger) *slowCalls {
	return &slowCalls{log: log, after: slowUnavailableAfter, now: time.Now}
}

// unavailable records that method was answered err, a -32004, after waited.
func (s *slowCalls) unavailable(method string, waited time.Duration, err error) {
	if s == nil || s.log == nil || waited < s.after {
		return
	}
	s.mu.Lock()
	now := s.now()
	if !s.last.IsZero() && now.Sub(s.last) < time.Second {
		s.skipped++
		s.mu.Unlock()
		return
	}
	skipped := s.skipped
	s.last, s.skipped = now, 0
	s.mu.Unlock()
	s.log.Warn("a call was answered unavailable (-32004) only after a long wait; its client retries it, and until then a write's outcome is unknown: check that a leader is elected and reachable from this agent (flowd status, flowd operator raft list-peers)",
		"method", method, "waited", waited.Round(time.Millisecond), "reason", err.Error(), "more_since_last_line", skipped)
}
