package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

type claimOutcome struct {
	tasks []rpc.Claimed
	err   error
	took  time.Duration
}

// holdClaim starts a 30 s long-poll claim on c and returns once the
// leader holds it (and no other).
func holdClaim(t *testing.T, leader *Agent, c *rpc.Client, worker, typ string) <-chan claimOutcome {
	t.Helper()
	out := make(chan claimOutcome, 1)
	testutil.EventuallyTrue(t, 5*time.Second, 10*time.Millisecond, "the leader holds no claim", func() bool { return leader.node.WaitingClaims() == 0 })
	go func() {
		start := time.Now()
		got, err := c.TaskClaim(context.Background(), rpc.ClaimParams{WorkerID: worker, Types: []string{typ}, WaitMS: 30000})
		out <- claimOutcome{got, err, time.Since(start)}
	}()
	testutil.EventuallyTrue(t, 5*time.Second, 10*time.Millisecond, "the leader holds the claim of "+worker, func() bool { return leader.node.WaitingClaims() == 1 })
	return out
}

// A worker that stops claiming half-closes its claim connection: the long
// poll ends at once with an answer (not a dropped connection), on the
// leader and through a follower alike.
func TestHalfClosedClaimIsAnswered(t *testing.T) {
	agents := startAgents(t, 3)
	leader, fs := followers(agents)
	for _, target := range []*Agent{leader, fs[0]} {
		c := client(t, target)
		res := holdClaim(t, leader, c, "w-"+target.cfg.NodeID, "t")
		c.CloseWrite()
		r := <-res
		if r.err != nil || len(r.tasks) != 0 || r.took > 10*time.Second {
			t.Fatalf("via %s: half-closed claim answered %v %v after %v, want no tasks at once", target.cfg.NodeID, r.tasks, r.err, r.took)
		}
		testutil.EventuallyTrue(t, 5*time.Second, 10*time.Millisecond, "the leader stops holding the claim", func() bool { return leader.node.WaitingClaims() == 0 })
	}
}

// Invariant: a lease goes to a worker that hears of it. A task submitted
// in the instant a worker half-closes its claim is either in the claim's
// answer or still ready and unattempted, never leased to nobody.
func TestHalfCloseRacingSubmitLeasesToNobody(t *testing.T) {
	agents := startAgents(t, 3)
	leader, fs := followers(agents)
	submitter := client(t, leader)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	handed := 0
	const rounds = 12
	for i := range rounds {
		target := []*Agent{leader, fs[0]}[i%2]
		c := client(t, target)
		typ := fmt.Sprintf("t%d", i) // a round claims only its own task
		res := holdClaim(t, leader, c, "w-"+typ, typ)
		submitted := make(chan string, 1)
		go func() {
			s, err := submitter.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"` + typ + `"}]}`)})
			if err != nil {
				t.Error(err)
				submitted <- ""
				return
			}
			submitted <- s.ID
		}()
		c.CloseWrite()
		r, id := <-res, <-submitted
		if r.err != nil || id == "" {
			t.Fatalf("round %d: claim %v, submit %q", i, r.err, id)
		}
		if len(r.tasks) == 1 && r.tasks[0].RunID == id {
			handed++
			continue
		}
		if len(r.tasks) != 0 {
			t.Fatalf("round %d: claim answered %+v", i, r.tasks)
		}
		tk, err := submitter.TaskGet(ctx, id+"/a")
		if err != nil {
			t.Fatal(err)
		}
		// Nobody else claims here: a lease it holds went to nobody.
		if tk.State != domain.TaskReady || tk.Attempt != 0 {
			t.Fatalf("round %d via %s: the claim answered nothing but the task is %s (attempt %d)", i, target.cfg.NodeID, tk.State, tk.Attempt)
		}
		c.Close()
	}
	t.Logf("%d of %d racing tasks went to the half-closing worker", handed, rounds)
}
