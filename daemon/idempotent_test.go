package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/cluster/raftnode"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// A claim re-sent with the same request id (what the client and the
// forwarder do after a lost answer) is answered the tasks its first
// delivery leased, with the same tokens, on the leader and through a
// follower, and spends no attempt; a submit retried with the same nonce is
// answered created:true, another call with the run's id created:false.
func TestResentClaimAndSubmitAreIdempotent(t *testing.T) {
	agents := startAgents(t, 3)
	leader, fs := followers(agents)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, target := range []*Agent{leader, fs[0]} {
		c := client(t, target)
		id := rpc.NewRequestID()
		typ := "t-" + target.cfg.NodeID
		runID := newRunID()
		sub := rpc.SubmitParams{ID: runID, Nonce: "n-" + runID, Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"` + typ + `"},{"key":"b","type":"` + typ + `"}]}`)}
		for i, want := range []bool{true, true} {
			res, err := c.RunSubmit(ctx, sub)
			if err != nil || res.Created != want {
				t.Fatalf("via %s: submit %d with the creating nonce: %+v %v, want created:%v", target.cfg.NodeID, i, res, err, want)
			}
		}
		other := sub
		other.Nonce = "someone-else"
		if res, err := c.RunSubmit(ctx, other); err != nil || res.Created {
			t.Fatalf("via %s: another call with the run's id: %+v %v, want created:false", target.cfg.NodeID, res, err)
		}
		p := rpc.ClaimParams{WorkerID: "w", Types: []string{typ}, Max: 1, RequestID: id}
		first, err := c.TaskClaim(ctx, p)
		if err != nil || len(first) != 1 {
			t.Fatalf("via %s: claim: %+v %v", target.cfg.NodeID, first, err)
		}
		p.WaitMS = 5000 // a re-sent long poll answers at once, too
		again, err := c.TaskClaim(ctx, p)
		if err != nil || len(again) != 1 || again[0].TaskID != first[0].TaskID || again[0].FencingToken != first[0].FencingToken {
			t.Fatalf("via %s: re-sent claim answered %+v %v, first %+v", target.cfg.NodeID, again, err, first)
		}
		tk, err := c.TaskGet(ctx, first[0].TaskID)
		if err != nil || tk.Attempt != 1 || len(tk.Attempts) != 1 || !tk.Attempts[0].AckedAt.IsZero() {
			t.Fatalf("via %s: task after a re-sent claim: %+v %v, want one unacknowledged attempt", target.cfg.NodeID, tk, err)
		}
		// A heartbeat acknowledges the claim; task.get shows when.
		if ack, err := c.TaskHeartbeat(ctx, first[0].TaskID, first[0].FencingToken); err != nil || !ack.Accepted {
			t.Fatalf("via %s: heartbeat: %+v %v", target.cfg.NodeID, ack, err)
		}
		if tk, err = c.TaskGet(ctx, first[0].TaskID); err != nil || tk.Attempts[0].AckedAt.IsZero() {
			t.Fatalf("via %s: acknowledged attempt shows no acked_at: %+v %v", target.cfg.NodeID, tk, err)
		}
		// The other task is still there for a new request.
		p.RequestID, p.WaitMS = rpc.NewRequestID(), 0
		if next, err := c.TaskClaim(ctx, p); err != nil || len(next) != 1 || next[0].TaskID == first[0].TaskID {
			t.Fatalf("via %s: a new request: %+v %v", target.cfg.NodeID, next, err)
		}
	}
}

// lossyClaims is the one-node cluster's proposer, except that the first
// long-polled claim's answer is lost after its entry applied: the leases
// are made, the caller hears "outcome unknown".
type lossyClaims struct {
	*raftnode.Node
	lost atomic.Bool
}

func (l *lossyClaims) Claim(ctx context.Context, w fsm.Waiter, grace time.Duration) ([]fsm.Claimed, error) {
	got, err := l.Node.Claim(ctx, w, grace)
	if err == nil && len(got) > 0 && l.lost.CompareAndSwap(false, true) {
		return nil, &domain.UnavailableError{Reason: "the claim did not commit in time; retry"}
	}
	return got, err
}

// A client that sends no request id (a script, an outside SDK) cannot
// re-send one after a lost answer. The agent that picked the id keeps it
// when the outcome is unknown, and the worker's next claim through that
// agent carries it: answered the lease the lost answer held (same token),
// not a second task, and no lease is left with nobody.
func TestAgentResendsTheRequestIDOfAClaimWhoseAnswerWasLost(t *testing.T) {
	n := raftnode.NewTestCluster(t, 1, nil).Leader()
	a := seamAgent(n.ID(), &lossyClaims{Node: n}, n.FSM())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var runs []string
	for range 2 {
		sub, err := a.runSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"bare"}]}`)})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, sub.ID)
	}
	p := rpc.ClaimParams{WorkerID: "script", Types: []string{"bare"}, Max: 1, WaitMS: 2000}
	if res, err := a.taskClaim(ctx, p); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("first claim: %+v %v, want the lost answer (unavailable)", res, err)
	}
	again, err := a.taskClaim(ctx, p)
	if err != nil || len(again.Tasks) != 1 {
		t.Fatalf("next claim: %+v %v, want one task", again, err)
	}
	leased := 0
	for _, r := range runs {
		tk, err := a.taskGet(ctx, rpc.TaskIDParams{ID: r + "/a"})
		if err != nil {
			t.Fatal(err)
		}
		if tk.State == "running" {
			leased++
			if tk.ID != again.Tasks[0].TaskID || tk.FencingToken != again.Tasks[0].FencingToken {
				t.Fatalf("leased %s token %d, but the worker holds %s token %d", tk.ID, tk.FencingToken, again.Tasks[0].TaskID, again.Tasks[0].FencingToken)
			}
		}
	}
	if leased != 1 {
		t.Fatalf("%d tasks leased, want 1 (the one the worker holds)", leased)
	}
	// The kept id was used once: the next claim leases the other task.
	if next, err := a.taskClaim(ctx, p); err != nil || len(next.Tasks) != 1 || next.Tasks[0].TaskID == again.Tasks[0].TaskID {
		t.Fatalf("a third claim: %+v %v, want the other task", next, err)
	}
}
