package e2e

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/flowd/flowd/rpc"
)

// A write a follower forwarded to a leader that stops answering (SIGSTOP)
// is re-sent to the new leader as soon as one is elected: it answers in
// about an election, not after its whole 10 s budget, and exactly once.
func TestForwardedWriteFollowsTheNewLeader(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.waitLeader()
	f := c.followers(leader)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := rpc.Dial(ctx, "unix://"+f.sock, rpc.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	submit := func(id string) (*rpc.SubmitResult, error) {
		var out rpc.SubmitResult
		err := conn.Call(ctx, rpc.MethodRunSubmit, rpc.SubmitParams{ID: id, Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t"}]}`)}, &out)
		return &out, err
	}
	// The follower's forwarding connection to the leader is open.
	if _, err := submit("01a2319c-0000-7000-8000-000000000001"); err != nil {
		t.Fatal(err)
	}
	if err := leader.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = leader.cmd.Process.Signal(syscall.SIGCONT) }()
	start := time.Now()
	res, err := submit("01a2319c-0000-7000-8000-000000000002")
	took := time.Since(start)
	if err != nil || !res.Created {
		t.Fatalf("submit through the follower with the leader stopped: %+v %v after %v", res, err, took)
	}
	// The budget is 10 s; an election here takes well under 3 s.
	if took > 5*time.Second {
		t.Fatalf("the forwarded submit answered after %v: it waited for the stopped leader instead of re-routing", took)
	}
	t.Logf("answered %v after the leader was stopped", took.Round(time.Millisecond))
}
