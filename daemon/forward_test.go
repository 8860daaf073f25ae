package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

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
	if _, err := c.GetRun(ctx, onTime); err != nil {
		t.Fatalf("the forward within its deadline: %v", err)
	}
	if _, err := c.GetRun(ctx, late); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("the late forward was executed: %v", err)
	}
	// The envelope serves only the forwarded methods.
	var out any
	err = conn.Call(ctx, methodForward, forwardCall{Method: rpc.MethodSnapshotSave}, &out)
	if !errors.As(err, &re) || re.Code != rpc.CodeMethodNotFound {
		t.Fatalf("snapshot.save through the envelope: %v, want -32601", err)
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
	if s, err := client(t, leader).Settings(ctx); err != nil || s.MaxRunningRuns != nil && *s.MaxRunningRuns == 3 {
		t.Fatalf("the refused settings.set took effect: %+v %v", s, err)
	}
	if err := conn.Call(ctx, methodForward, forwardCall{Method: rpc.MethodTaskHeartbeat, Params: rpc.HeartbeatParams{TaskID: "r/a", FencingToken: 1},
		For: &forwardOrigin{UID: 65534, GID: 65534, PID: 1, Roles: rpc.RoleWorker}}, &out); errors.As(err, &re) && re.Code == rpc.CodePermissionDenied {
		t.Fatalf("a worker's forwarded heartbeat was refused: %v", err)
	}
}
