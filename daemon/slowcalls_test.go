package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/cluster/raftnode"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// A -32004 answered after a long wait is logged through the handler chain
// with its method, wait and reason; a fast one, another error and a success
// are not.
func TestLateUnavailableAnswersAreLogged(t *testing.T) {
	var out logBuffer
	a := newAgent(Config{NodeID: "n1"}, slog.New(slog.NewTextHandler(&out, nil)))
	a.metrics = newMetrics(a)
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
	a.metrics.slow.after = 0 // every wait is long now
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
	var out logBuffer
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

// A lease that expires before its worker acknowledges the claim is logged
// by the leader, through the agent's commit hook, with the task and the
// worker: on a one-node cluster, a claimed task whose worker never calls
// again comes back after its lease, and the log says so.
func TestUnacknowledgedLeaseIsLogged(t *testing.T) {
	out := &logBuffer{wrote: make(chan struct{}, 1)}
	n := raftnode.NewTestCluster(t, 1, nil).Leader()
	a := newAgent(Config{NodeID: n.ID()}, slog.New(slog.NewTextHandler(out, nil)))
	a.wire(n, n.FSM())
	n.FSM().SetCommitHook(a.commitHook)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, err := a.runSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"orphan","lease_ms":200}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.taskClaim(ctx, rpc.ClaimParams{WorkerID: "w-gone", Types: []string{"orphan"}})
	if err != nil || len(got.Tasks) != 1 {
		t.Fatalf("claim: %+v %v", got, err)
	}
	want := "lease expired before its worker acknowledged"
	for {
		for _, l := range out.lines() {
			if strings.Contains(l, want) {
				if !strings.Contains(l, "level=WARN") || !strings.Contains(l, "task="+sub.ID+"/a") || !strings.Contains(l, "worker=w-gone") {
					t.Fatalf("orphan lease line %q, want WARN with the task and the worker", l)
				}
				return
			}
		}
		select {
		case <-out.wrote:
		case <-ctx.Done():
			t.Fatalf("no line about the unacknowledged lease; log: %q", out.lines())
		}
	}
}

// Only the leader logs orphan leases (every node applies the same events),
// and only the unacknowledged ones: an acknowledged lease that expired is
// a worker that stopped mid-task, reported as its attempt's outcome.
func TestOrphanLeasesOnlyOnTheLeaderAndOnlyUnacknowledged(t *testing.T) {
	var out logBuffer
	leading := false
	o := newOrphanLeases(slog.New(slog.NewTextHandler(&out, nil)), func() bool { return leading })
	unacked := fsm.Event{Kind: "task", RunID: "r", TaskKey: "a", Transition: domain.EdgeReapLease, Worker: "w", Attempt: 1, Error: fsm.OutcomeLeaseUnacked}
	expired := unacked
	expired.Error = fsm.OutcomeLeaseExpired
	o.observe([]fsm.Event{unacked})
	if l := out.lines(); len(l) != 0 {
		t.Fatalf("a follower logged: %q", l)
	}
	leading = true
	o.observe([]fsm.Event{expired})
	if l := out.lines(); len(l) != 0 {
		t.Fatalf("an acknowledged lease's expiry was logged: %q", l)
	}
	o.observe([]fsm.Event{unacked})
	if l := out.lines(); len(l) != 1 || !strings.Contains(l[0], "task=r/a") {
		t.Fatalf("leader, unacknowledged: %q, want one line for r/a", l)
	}
}
