package raftnode

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm"
)

// Fuzzy partitions (after hashicorp/raft's fuzzy tests): commands are
// proposed to whoever leads while random nodes are cut off and healed;
// afterwards every replica has the same state at the same index, and no
// acknowledged submission is missing.
func TestFuzzyPartitionsConverge(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	c := NewTestCluster(t, 3, nil)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d", seed)
	spec := mustSpec(t, `{"tasks":[{"key":"a","type":"t","lease_ms":300,"retry":{"max_attempts":5,"initial_backoff_ms":5}},{"key":"b","type":"t","deps":["a"]}]}`)
	acked := map[string]bool{}
	propose := func(cmd fsm.Command) (any, bool) {
		for _, n := range c.Nodes {
			if n == nil || !n.IsLeader() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			res, _, err := n.Propose(ctx, cmd)
			cancel()
			return res, err == nil
		}
		return nil, false
	}
	for round := 0; round < 12; round++ {
		victim := c.Nodes[rng.IntN(len(c.Nodes))]
		c.Partition(victim)
		for i := 0; i < 15; i++ {
			id := fmt.Sprintf("r%d-%d", round, i)
			switch rng.IntN(3) {
			case 0:
				if _, ok := propose(&fsm.Submit{ID: id, Spec: spec}); ok {
					acked[id] = true
				}
			case 1:
				if res, ok := propose(&fsm.Claim{Waiters: []fsm.Waiter{{WorkerID: "w", Max: 3}}}); ok {
					for _, cl := range res.(*fsm.ClaimResult).Assigned[0] {
						if rng.IntN(2) == 0 {
							propose(&fsm.Complete{TaskID: cl.TaskID, Token: cl.FencingToken})
						}
					}
				}
			case 2:
				propose(&fsm.Reap{})
			}
		}
		c.Heal()
		c.Leader() // wait for the cluster to settle before the next cut
	}
	assertConverged(t, c)
	ids := map[string]bool{}
	for _, id := range c.Leader().FSM().RunIDs() {
		ids[id] = true
	}
	for id := range acked {
		if !ids[id] {
			t.Fatalf("acknowledged submission %s lost", id)
		}
	}
	if len(acked) == 0 {
		t.Fatal("no submission was acknowledged; the test exercised nothing")
	}
}
