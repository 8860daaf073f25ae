package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// syncBuffer is a log sink that handlers may write from any goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.FieldsFunc(s.b.String(), func(r rune) bool { return r == '\n' })
}

// A -32004 answered after a long wait is logged through the handler chain
// with its method, wait and reason; a fast one, another error and a success
// are not.
func TestLateUnavailableAnswersAreLogged(t *testing.T) {
	var out syncBuffer
	a := newAgent(Config{NodeID: "n1"}, slog.New(slog.NewTextHandler(&out, nil)))
	a.metrics = newMetrics(a)
	waited := time.Duration(0)
	clock := time.Unix(1_700_000_000, 0)
	a.metrics.slow.now = func() time.Time { return clock }
	unavailable := &domain.UnavailableError{Reason: "the command did not commit in time; its outcome is unknown", RetryAfter: time.Second}
	h := a.metrics.instrument(map[string]rpc.Handler{
		"run.submit":    func(context.Context, json.RawMessage) (any, error) { return nil, unavailable },
		"task.complete": func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("boom") },
		"run.get":       func(context.Context, json.RawMessage) (any, error) { return "ok", nil },
	})
	// The wait is what the threshold is compared with; the handlers answer
	// at once, so the threshold stands in for it.
	a.metrics.slow.after = time.Hour
	if _, err := h["run.submit"](context.Background(), nil); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("the wrapper changed the handler's error: %v", err)
	}
	if l := out.lines(); len(l) != 0 {
		t.Fatalf("a fast -32004 was logged: %q", l)
	}
	a.metrics.slow.after = waited
	for _, m := range []string{"task.complete", "run.get"} {
		_, _ = h[m](context.Background(), nil)
	}
	if l := out.lines(); len(l) != 0 {
		t.Fatalf("a call not answered -32004 was logged: %q", l)
	}
	_, _ = h["run.submit"](context.Background(), nil)
	l := out.lines()
	if len(l) != 1 || !strings.Contains(l[0], "level=WARN") || !strings.Contains(l[0], "method=run.submit") ||
		!strings.Contains(l[0], "outcome is unknown") || !strings.Contains(l[0], "waited=") {
		t.Fatalf("late -32004: log %q, want one WARN line with method, wait and reason", l)
	}
}

// At most one line a second; the next line says how many were left out.
func TestLateUnavailableLogIsRateLimited(t *testing.T) {
	var out syncBuffer
	s := newSlowCalls(slog.New(slog.NewTextHandler(&out, nil)))
	clock := time.Unix(1_700_000_000, 0)
	s.now = func() time.Time { return clock }
	err := &domain.UnavailableError{Reason: "no leader reachable in time"}
	for range 5 {
		s.unavailable("run.submit", 10*time.Second, err)
	}
	if l := out.lines(); len(l) != 1 {
		t.Fatalf("five late answers within a second logged %d lines, want 1: %q", len(l), l)
	}
	s.unavailable("run.submit", time.Second, err) // under the threshold: not counted
	clock = clock.Add(time.Second)
	s.unavailable("task.complete", 10*time.Second, err)
	l := out.lines()
	if len(l) != 2 || !strings.Contains(l[1], "method=task.complete") || !strings.Contains(l[1], "more_since_last_line=4") {
		t.Fatalf("after a second: %q, want a second line counting the 4 left out", l)
	}
	var nilCalls *slowCalls
	nilCalls.unavailable("run.submit", time.Hour, err) // a bare agent without metrics: no panic
}
