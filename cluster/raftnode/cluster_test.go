package raftnode

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

const diamond = `{"name":"diamond","tasks":[
 {"key":"a","type":"echo","retry":{"max_attempts":3,"initial_backoff_ms":10}},
 {"key":"b","type":"echo","deps":["a"]},
 {"key":"c","type":"echo","deps":["a"]},
 {"key":"d","type":"echo","deps":["b","c"]}]}`

func mustSpec(t testing.TB, s string) domain.Spec {
	spec, err := domain.ParseSpec([]byte(s), domain.DefaultLimits)
	if err != nil {
		panic(err)
	}
	return spec
}

// claim long-polls through the leader's dispatcher, following leadership.
func claim(t testing.TB, c *TestCluster, worker string, max int) []fsm.Claimed {
	t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		l := c.Leader()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := l.Claim(ctx, fsm.Waiter{WorkerID: worker, Max: max}, time.Second)
		cancel()
		if err == nil && len(got) > 0 {
			return got
		}
		if err != nil && !errors.Is(err, domain.ErrUnavailable) {
			t.Fatalf("claim: %v", err)
		}
	}
	t.Fatal("claim got nothing")
	return nil
}

func complete(t testing.TB, c *TestCluster, cl fsm.Claimed, result string) bool {
	t.Helper()
	res, _ := c.Propose(&fsm.Complete{TaskID: cl.TaskID, Token: cl.FencingToken, Result: json.RawMessage(result)})
	return res.(*fsm.AckResult).Accepted
}

func assertConverged(t testing.TB, c *TestCluster) {
	t.Helper()
	ds := c.Converged()
	var first string
	for id, d := range ds {
		if first == "" {
			first = d
		} else if d != first {
			t.Fatalf("digest of %s differs: %v", id, ds)
		}
	}
}

func TestDiamondAcrossThreeNodes(t *testing.T) {
	c := NewTestCluster(t, 3, nil)
	c.Propose(&fsm.Submit{ID: "run-1", Spec: mustSpec(t, diamond)})
	a := claim(t, c, "w1", 4)
	if len(a) != 1 || a[0].TaskKey != "a" {
		t.Fatalf("first claim %+v", a)
	}
	complete(t, c, a[0], `{"a":1}`)
	bc := claim(t, c, "w2", 4)
	if len(bc) != 2 {
		// The second may arrive in its own entry.
		bc = append(bc, claim(t, c, "w2", 4)...)
	}
	for _, n := range c.Nodes {
		_, idx := c.Propose(&fsm.Noop{})
		c.WaitForApplied(idx)
		if tk, _ := n.FSM().GetTask("run-1/d"); tk.State != domain.TaskPending {
			t.Fatalf("d is %s on %s before b and c finished", tk.State, n.ID())
		}
	}
	for _, cl := range bc {
		if string(cl.DepResults["a"]) != `{"a":1}` {
			t.Fatalf("%s dep_results %s", cl.TaskKey, cl.DepResults)
		}
		complete(t, c, cl, `1`)
	}
	d := claim(t, c, "w3", 1)
	complete(t, c, d[0], `2`)
	assertConverged(t, c)
	for _, n := range c.Nodes {
		r, err := n.FSM().GetRunOnly("run-1")
		if err != nil || r.State != domain.RunSucceeded {
			t.Fatalf("node %s: run %v %v", n.ID(), r, err)
		}
	}
}

func TestLeaderLossMidRun(t *testing.T) {
	c := NewTestCluster(t, 3, nil)
	c.Propose(&fsm.Submit{ID: "run-1", Spec: mustSpec(t, diamond)})
	a := claim(t, c, "w1", 1)
	complete(t, c, a[0], `1`)
	old := c.Leader()
	oldID := old.ID()
	c.Kill(old)
	l := c.Leader()
	if l.ID() == oldID {
		t.Fatal("dead node still leader")
	}
	seen := map[string]int{}
	for len(seen) < 3 {
		for _, cl := range claim(t, c, "w2", 4) {
			seen[cl.TaskKey]++
			if !complete(t, c, cl, `2`) {
				t.Fatalf("completion of %s rejected", cl.TaskKey)
			}
		}
	}
	r, tasks, err := l.FSM().GetRun("run-1")
	if err != nil || r.State != domain.RunSucceeded {
		t.Fatalf("run %v %v", r, err)
	}
	for _, tk := range tasks {
		succeeded := 0
		for _, at := range tk.Attempts {
			if at.Outcome == fsm.OutcomeSucceeded {
				succeeded++
			}
		}
		if succeeded != 1 {
			t.Fatalf("task %s succeeded %d times: %+v", tk.Key, succeeded, tk.Attempts)
		}
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("task %s claimed %d times", k, n)
		}
	}
	// The killed node comes back and catches up.
	c.Restart(c.Index(nil))
	assertConverged(t, c)
}

func TestPartitionedLeaderCannotCommit(t *testing.T) {
	c := NewTestCluster(t, 3, nil)
	c.Propose(&fsm.Submit{ID: "run-1", Spec: mustSpec(t, diamond)})
	old := c.Leader()
	c.Partition(old)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, _, err := old.Propose(ctx, &fsm.Submit{ID: "lost", Spec: mustSpec(t, diamond)})
	cancel()
	if err == nil {
		t.Fatal("a partitioned leader committed a command")
	}
	l := c.Leader()
	if l == old {
		t.Fatal("the partitioned node is still the leader of the majority")
	}
	c.Propose(&fsm.Submit{ID: "run-2", Spec: mustSpec(t, diamond)})
	cl := claim(t, c, "w", 2)
	complete(t, c, cl[0], `1`)
	c.Heal()
	assertConverged(t, c)
	if _, err := old.FSM().GetRunOnly("lost"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("uncommitted submission survived the partition: %v", err)
	}
	if _, err := old.FSM().GetRunOnly("run-2"); err != nil {
		t.Fatalf("healed node missed run-2: %v", err)
	}
}

// The fencing story with the real reaper: a worker that acknowledged its
// claim (a heartbeat) and then stops heartbeating loses its lease, the
// task is claimed again with a larger token (a spent attempt, retried after
// its backoff), and the stale completion is rejected.
func TestFencingWithRealReaper(t *testing.T) {
	c := NewTestCluster(t, 3, nil)
	c.Propose(&fsm.Submit{ID: "r", Spec: mustSpec(t, `{"tasks":[{"key":"x","type":"echo","lease_ms":200,"retry":{"max_attempts":3,"initial_backoff_ms":10}}]}`)})
	first := claim(t, c, "stalled", 1)[0]
	if res, _ := c.Propose(&fsm.Heartbeat{TaskID: first.TaskID, Token: first.FencingToken}); !res.(*fsm.AckResult).Accepted {
		t.Fatal("heartbeat refused")
	}
	second := claim(t, c, "fresh", 1)[0] // only possible once the reaper expired the first lease
	if second.FencingToken <= first.FencingToken || second.Attempt < 2 {
		t.Fatalf("tokens %d then %d, attempt %d", first.FencingToken, second.FencingToken, second.Attempt)
	}
	if complete(t, c, first, `"late"`) {
		t.Fatal("stale completion accepted")
	}
	if !complete(t, c, second, `"fresh"`) {
		t.Fatal("current completion rejected")
	}
	tk, _ := c.Leader().FSM().GetTask("r/x")
	if string(tk.Result) != `"fresh"` || tk.Attempts[0].Outcome != fsm.OutcomeLeaseExpired {
		t.Fatalf("task %+v", tk)
	}
}

func TestRetryTickThroughCluster(t *testing.T) {
	c := NewTestCluster(t, 3, nil)
	c.Propose(&fsm.Submit{ID: "r", Spec: mustSpec(t, `{"tasks":[{"key":"x","type":"flaky","retry":{"max_attempts":3,"initial_backoff_ms":20,"max_backoff_ms":40}}]}`)})
	for i := 0; i < 2; i++ {
		cl := claim(t, c, "w", 1)[0]
		retryable := true
		c.Propose(&fsm.Fail{TaskID: cl.TaskID, Token: cl.FencingToken, Error: "boom", Retryable: &retryable})
	}
	cl := claim(t, c, "w", 1)[0]
	if cl.Attempt != 3 {
		t.Fatalf("attempt %d", cl.Attempt)
	}
	complete(t, c, cl, `1`)
	tk, _ := c.Leader().FSM().GetTask("r/x")
	if tk.Attempt != 3 || len(tk.Attempts) != 3 || tk.StartedAt != tk.Attempts[0].ClaimedAt {
		t.Fatalf("task %+v", tk)
	}
}

// Replaying the committed log into a fresh FSM gives the same digest.
func TestLogReplayIsDeterministic(t *testing.T) {
	c := NewTestCluster(t, 3, nil)
	c.Propose(&fsm.Submit{ID: "r", Spec: mustSpec(t, diamond)})
	for i := 0; i < 3; i++ {
		for _, cl := range claim(t, c, "w", 4) {
			complete(t, c, cl, `1`)
		}
	}
	assertConverged(t, c)
	n := c.Leader()
	want, at, _ := n.FSM().Digest()
	first, _ := n.cfg.LogStore.FirstIndex()
	if first != 1 {
		t.Skip("log was compacted")
	}
	fresh, _ := fsm.New(store.NewMemStore(), fsm.Options{})
	adapter := &raftFSM{f: fresh}
	var logs []*raft.Log
	for i := uint64(1); i <= at; i++ {
		var l raft.Log
		if err := n.cfg.LogStore.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, &l)
	}
	adapter.ApplyBatch(logs)
	if got, _, _ := fresh.Digest(); got != want {
		t.Fatal("replayed log gives a different state")
	}
}

func TestRestartAfterSnapshotAndCompaction(t *testing.T) {
	c := NewTestCluster(t, 3, func(cfg *Config) { cfg.TrailingLogs = 5 })
	for i := 0; i < 20; i++ {
		c.Propose(&fsm.Submit{ID: "r" + string(rune('a'+i)), Spec: mustSpec(t, `{"tasks":[{"key":"x","type":"t"}]}`)})
	}
	f := c.Followers()[0]
	if err := f.Snapshot(); err != nil {
		t.Fatal(err)
	}
	i := c.Kill(f)
	for j := 0; j < 5; j++ {
		c.Propose(&fsm.Submit{ID: "s" + string(rune('a'+j)), Spec: mustSpec(t, `{"tasks":[{"key":"x","type":"t"}]}`)})
	}
	c.Restart(i)
	assertConverged(t, c)
	if got := len(c.Nodes[i].FSM().RunIDs()); got != 25 {
		t.Fatalf("restarted node has %d runs, want 25", got)
	}
}

// A leadership transfer to the node that leads is done at once (it already
// leads; raft itself refuses it), and one to another member moves
// leadership there.
func TestTransferLeadershipToTheLeaderIsDone(t *testing.T) {
	c := NewTestCluster(t, 3, nil)
	l := c.Leader()
	if err := l.TransferLeadership(l.ID()); err != nil {
		t.Fatalf("transfer to the leader itself: %v", err)
	}
	if !l.IsLeader() {
		t.Fatal("the leader stepped down on a transfer to itself")
	}
	target := c.Followers()[0]
	if err := l.TransferLeadership(target.ID()); err != nil {
		t.Fatalf("transfer to %s: %v", target.ID(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !target.IsLeader() {
		target.waitLeaderChange(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s never led after the transfer", target.ID())
		}
	}
}
