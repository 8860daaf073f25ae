package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// forwardConn dials a's forwarding port as a member would (plaintext on
// loopback in these tests).
func forwardConn(t *testing.T, ctx context.Context, a *Agent) *rpc.Conn {
	t.Helper()
	conn, err := rpc.Dial(ctx, "tcp://"+a.cfg.ForwardAddr, rpc.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Invariant: a forwarded request is never executed after its caller was
// answered. A forwarded submit that reaches the leader after its caller's
// deadline (it sat in a socket buffer while the network was cut) is
// refused with -32004 and creates nothing; one within its deadline runs.
func TestForwardedRequestPastItsDeadlineIsNotExecuted(t *testing.T) {
	agents := startAgents(t, 3)
	leader, _ := followers(agents)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn := forwardConn(t, ctx, leader)
	late, onTime := newRunID(), newRunID()
	sub := func(id string, deadline time.Time) error {
		var out rpc.SubmitResult
		return conn.Call(ctx, methodForward, forwardCall{Method: rpc.MethodRunSubmit, DeadlineMS: deadline.UnixMilli(),
			Params: rpc.SubmitParams{ID: id, Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t"}]}`)}}, &out)
	}
	err := sub(late, time.Now().Add(-time.Millisecond))
	var re *rpc.Error
	if !errors.As(err, &re) || re.Code != rpc.CodeUnavailable || !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("late forward: %v, want -32004", err)
	}
	if err := sub(onTime, time.Now().Add(5*time.Second)); err != nil {
		t.Fatalf("forward within its deadline: %v", err)
	}
	c := client(t, leader)
	if _, err := c.RunGet(ctx, onTime); err != nil {
		t.Fatalf("the forward within its deadline: %v", err)
	}
	if _, err := c.RunGet(ctx, late); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("the late forward was executed: %v", err)
	}
	// The envelope serves only the forwarded methods.
	var out any
	err = conn.Call(ctx, methodForward, forwardCall{Method: rpc.MethodClusterStats}, &out)
	if !errors.As(err, &re) || re.Code != rpc.CodeMethodNotFound {
		t.Fatalf("cluster.stats through the envelope: %v, want -32601", err)
	}
}

// The leader checks a forwarded call against the roles the follower saw
// for its caller: a worker-role caller's settings.set is refused there
// too, whatever the forwarding member may do.
func TestForwardedCallCarriesItsCallersRoles(t *testing.T) {
	agents := startAgents(t, 3)
	leader, _ := followers(agents)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn := forwardConn(t, ctx, leader)
	var out any
	max := 3
	err := conn.Call(ctx, methodForward, forwardCall{Method: rpc.MethodSettingsSet, Params: rpc.Settings{MaxRunningRuns: &max},
		For: &forwardOrigin{UID: 65534, GID: 65534, PID: 1, Roles: rpc.RoleWorker}}, &out)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Code != rpc.CodePermissionDenied {
		t.Fatalf("a worker's forwarded settings.set: %v, want -32007", err)
	}
	if s, err := client(t, leader).SettingsGet(ctx); err != nil || s.MaxRunningRuns != nil && *s.MaxRunningRuns == 3 {
		t.Fatalf("the refused settings.set took effect: %+v %v", s, err)
	}
	if err := conn.Call(ctx, methodForward, forwardCall{Method: rpc.MethodTaskHeartbeat, Params: rpc.HeartbeatParams{TaskID: "r/a", FencingToken: 1},
		For: &forwardOrigin{UID: 65534, GID: 65534, PID: 1, Roles: rpc.RoleWorker}}, &out); errors.As(err, &re) && re.Code == rpc.CodePermissionDenied {
		t.Fatalf("a worker's forwarded heartbeat was refused: %v", err)
	}
}

// fakeLeadership is a follower whose leader is at addr until lose is
// called: then no node leads (an agent cut off from the leader, or an
// election in progress).
type fakeLeadership struct {
	leadership // unused methods panic
	mu         sync.Mutex
	addr       string
	epoch      context.Context
	end        context.CancelFunc
}

func newFakeLeadership(addr string) *fakeLeadership {
	f := &fakeLeadership{addr: addr}
	f.epoch, f.end = context.WithCancel(context.Background())
	return f
}

func (f *fakeLeadership) IsLeader() bool { return false }
func (f *fakeLeadership) Leader() (string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.addr == "" {
		return "", ""
	}
	return "n1", f.addr
}
func (f *fakeLeadership) NodeMeta(string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return map[string]string{"forward": f.addr}
}
func (f *fakeLeadership) LeaderEpoch() context.Context {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.epoch
}
func (f *fakeLeadership) WaitLeaderChange(ctx context.Context, max time.Duration) {
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
func (f *fakeLeadership) Servers() []cluster.PeerStatus { return nil }

func (f *fakeLeadership) lose() {
	f.mu.Lock()
	f.addr = ""
	end := f.end
	f.epoch, f.end = context.WithCancel(context.Background())
	f.mu.Unlock()
	end()
}

// silentLeader listens as a leader's forwarding port that takes calls and
// never answers; each accepted connection is sent on got.
func silentLeader(t *testing.T) (net.Listener, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			got <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for len(got) > 0 {
			(<-got).Close()
		}
	})
	return ln, got
}

// A claim forwarded to a leader that this agent then loses (the leader
// took the claim and may have leased tasks to it, but cannot answer) is
// answered -32004 as soon as the loss is seen, not at the end of its
// wait: the worker re-sends its request id through an agent that reaches
// the leader while those leases still hold. Other forwarded writes keep
// waiting for a leader within their budget.
func TestClaimForwardAnswersAtOnceWhenTheLeaderIsLost(t *testing.T) {
	ln, got := silentLeader(t)
	for _, tc := range []struct {
		name     string
		longPoll bool
	}{{"claim", true}, {"submit", false}} {
		t.Run(tc.name, func(t *testing.T) {
			node := newFakeLeadership(ln.Addr().String())
			p := newLeaderProxy("n2", node, nil, slog.New(slog.DiscardHandler))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			deadline, _ := ctx.Deadline()
			if tc.longPoll {
				ctx = withExclusiveForward(ctx)
			}
			done := make(chan error, 1)
			go func() {
				_, err := onLeader(ctx, p, "task.claim", map[string]any{"worker_id": "w"}, func(context.Context) (rpc.ClaimResult, error) {
					return rpc.ClaimResult{}, errors.New("ran locally on a follower")
				})
				done <- err
			}()
			c := <-got // the call is out at the leader
			defer c.Close()
			node.lose()
			err := <-done
			left := time.Until(deadline)
			if !errors.Is(err, domain.ErrUnavailable) {
				t.Fatalf("answered %v, want -32004", err)
			}
			if tc.longPoll && left < 2500*time.Millisecond {
				t.Fatalf("the claim answered %v before the end of its budget: it waited instead of answering when the leader was lost", left)
			}
			if !tc.longPoll && left > 200*time.Millisecond {
				t.Fatalf("a forwarded write gave up %v before the end of its budget; it should wait for a new leader until then", left)
			}
		})
	}
}

// Invariant: a lease goes to a worker that hears of it. A claim whose
// client's input ends (it half-closed, or this agent drains it to stop)
// while its forward is out, and whose forward is then cut before the
// leader answered (leadership moved, this agent left the cluster), has an
// unknown outcome: the leader may have leased tasks to its request id. It
// is answered -32004 (re-send), never "no tasks", which would make the
// worker forget the request id and leave those leases with nobody.
func TestClaimCutAfterItsInputEndedIsNotAnsweredEmpty(t *testing.T) {
	ln, got := silentLeader(t)
	node := newFakeLeadership(ln.Addr().String())
	a := &Agent{proxy: newLeaderProxy("n2", node, nil, slog.New(slog.DiscardHandler))}
	input, endInput := context.WithCancel(context.Background())
	defer endInput()
	inputClosed = func(context.Context) context.Context { return input }
	defer func() { inputClosed = rpc.InputClosedContext }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type answer struct {
		res     rpc.ClaimResult
		unknown bool
		err     error
	}
	done := make(chan answer, 1)
	go func() {
		res, unknown, err := a.claimOnLeader(ctx, rpc.ClaimParams{WorkerID: "w", RequestID: "r1", WaitMS: 5000})
		done <- answer{res, unknown, err}
	}()
	c := <-got // the claim is out at the leader
	defer c.Close()
	endInput() // the client's input ends: the forward is half-closed, its answer awaited
	// The leader sees the half-close (the end of its input) before the cut.
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("the leader's end of the forward: %v, want the half-close", err)
	}
	node.lose() // and then the forward is cut before the leader answered
	r := <-done
	if !errors.Is(r.err, domain.ErrUnavailable) || !r.unknown {
		t.Fatalf("answered %+v (unknown %v, err %v), want -32004 with the outcome unknown", r.res, r.unknown, r.err)
	}
}
