package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// Outage recovery (docs/operations.md, "Outage recovery"): two of three
// agents are killed and their data dirs deleted for good; the survivor is
// stopped, recovered offline with `flowd operator raft recover`, started
// with its usual flags, and two fresh agents are added with `flowd operator
// raft add-peer`. Every committed run is there with its state, the cluster
// takes writes, and the three agents hold the same state at the same index.
func TestRecoverFromLostMajority(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	one := func(typ string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"name":%q,"tasks":[{"key":"a","type":%q}]}`, typ, typ))
	}
	// Committed runs: some completed by a worker, some pending.
	var ids []string
	for range 4 {
		ids = append(ids, submitID(t, cl, one("done")))
	}
	for range 4 {
		ids = append(ids, submitID(t, cl, one("todo")))
	}
	for range 4 {
		completeOK(t, cl, claimOne(t, cl, "w1", "done"))
	}
	before := map[string]domain.RunState{}
	for _, id := range ids {
		r, err := cl.RunGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		before[id] = r.State
	}
	sameState(t, c) // every agent has applied every commit: any may survive

	// Lose the leader and one follower for good; the other follower survives.
	leader := c.waitLeader()
	survivor := c.followers(leader)[0]
	var lost []*agent
	for _, a := range c.agents {
		if a != survivor {
			c.kill9(a)
			if err := os.RemoveAll(a.dir); err != nil {
				t.Fatal(err)
			}
			lost = append(lost, a)
		}
	}

	// Recover refuses while the survivor's agent runs: its socket answers,
	// and (pointed at another socket) its data dir is locked.
	recoverArgs := []string{"operator", "raft", "recover", "--node-id", survivor.id, "--data-dir", survivor.dir, "--socket", survivor.sock}
	if out, err := exec.Command(flowdBin, recoverArgs...).CombinedOutput(); exitCode(err) != 1 || !strings.Contains(string(out), "an agent answers on") {
		t.Fatalf("recover with the agent running: %v\n%s", err, out)
	}
	otherSock := append(recoverArgs[:len(recoverArgs)-1:len(recoverArgs)-1], survivor.dir+"/none.sock")
	if out, err := exec.Command(flowdBin, otherSock...).CombinedOutput(); exitCode(err) != 1 || !strings.Contains(string(out), "in use by a running agent") {
		t.Fatalf("recover of a locked data dir: %v\n%s", err, out)
	}
	c.stop(survivor)

	out, err := exec.Command(flowdBin, append(recoverArgs, "--dry-run", "-o", "json")...).Output()
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	var dry struct {
		DataDir struct {
			LastIndex    uint64     `json:"last_index"`
			AppliedIndex uint64     `json:"applied_index"`
			Servers      []rpc.Peer `json:"servers"`
		} `json:"data_dir"`
		WouldSet []struct{ ID, Address string } `json:"would_set"`
	}
	if err := json.Unmarshal(out, &dry); err != nil || dry.DataDir.LastIndex == 0 || dry.DataDir.AppliedIndex == 0 ||
		len(dry.DataDir.Servers) != 3 || len(dry.WouldSet) != 1 || dry.WouldSet[0].ID != survivor.id || dry.WouldSet[0].Address != survivor.raft {
		t.Fatalf("dry run answered %s (%v)", out, err)
	}

	start := time.Now()
	out, err = exec.Command(flowdBin, recoverArgs...).CombinedOutput()
	if err != nil {
		t.Fatalf("recover: %v\n%s", err, out)
	}
	recovered := time.Since(start)
	t.Logf("recover (%s):\n%s", recovered.Round(time.Millisecond), out)

	// Started with its usual flags (the three-node --peers is ignored: the
	// data dir has raft state), it leads alone and takes writes.
	c.restart(survivor)
	c.agents = []*agent{survivor}
	if l := c.waitLeader(); l != survivor {
		t.Fatalf("leader %s", l.id)
	}
	scl := c.client(survivor)
	after := submitID(t, scl, one("after"))
	led := time.Since(start)

	// Fresh agents, one at a time: --peers is the current configuration
	// plus the new node (never the old list: two fresh nodes could elect
	// each other), then add-peer through the survivor.
	members := []string{survivor.id + "=" + survivor.raft}
	for _, a := range lost {
		members = append(members, a.id+"="+a.raft)
		_ = os.Remove(a.dir + ".log")
		for i, arg := range a.args {
			if arg == "--peers" {
				a.args[i+1] = strings.Join(members, ",")
			}
		}
		c.start(a)
		c.agents = append(c.agents, a)
		if out, err := exec.Command(flowdBin, "--addr", "unix://"+survivor.sock, "--timeout", "20s",
			"operator", "raft", "add-peer", a.id, a.raft).CombinedOutput(); err != nil {
			t.Fatalf("add-peer %s: %v\n%s", a.id, err, out)
		}
		c.waitCaughtUp(a, survivor) // before the next one (docs/operations.md)
	}
	// Writes with three voters: submit, claim and complete.
	post := submitID(t, scl, one("post"))
	completeOK(t, scl, claimOne(t, scl, "w2", "post"))
	writes := time.Since(start)
	if r := waitRun(t, scl, post, 10*time.Second); r.State != domain.RunSucceeded {
		t.Fatalf("run after recovery: %s", r.State)
	}
	if st := c.status(survivor); st == nil || len(st.Peers) != 3 {
		t.Fatalf("configuration after adding two nodes: %+v", st)
	}
	sameState(t, c)
	for _, a := range c.agents {
		acl := c.client(a)
		if _, err := acl.RunGet(ctx, after); err != nil {
			t.Fatalf("%s: the run submitted to the recovered node alone: %v", a.id, err)
		}
		for id, want := range before {
			r, err := acl.RunGet(ctx, id)
			if err != nil || r.State != want {
				t.Fatalf("%s: run %s after recovery: %v %v, want %s", a.id, id, r, err, want)
			}
		}
	}
	for _, a := range lost {
		b, _ := os.ReadFile(a.dir + ".log")
		if !strings.Contains(strings.ToLower(string(b)), "installed remote snapshot") {
			t.Fatalf("%s did not catch up by snapshot (the recovered log is compacted):\n%s", a.id, tail(string(b), 20))
		}
	}
	t.Logf("recover command %s; leader alone taking writes %s after its start; submit+claim+complete with 3 voters %s after it",
		recovered.Round(time.Millisecond), led.Round(time.Millisecond), writes.Round(time.Millisecond))
}

var submitSeq atomic.Int64

// submitID submits with an id of its own, again on -32004 (a leader lost
// while the submit was out: outcome unknown, and the same id makes the
// retry safe), and returns the id.
func submitID(t *testing.T, cl *rpc.Client, wf json.RawMessage) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := fmt.Sprintf("0193a001-0000-7000-8000-%012x", submitSeq.Add(1))
	for attempt := 0; ; attempt++ {
		_, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: wf, ID: id})
		if err == nil {
			return id
		}
		if !errors.Is(err, domain.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("submit %s: %v", id, err)
		}
		time.Sleep(rpc.Backoff(attempt, 20*time.Millisecond, time.Second, err)) // the client's retry advice
	}
}

// completeOK completes a claimed task, again on -32004 (safe: the
// fencing token), and fails the test unless it is accepted.
func completeOK(t *testing.T, cl *rpc.Client, tk rpc.Claimed) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		ack, err := cl.TaskComplete(ctx, rpc.CompleteParams{TaskID: tk.TaskID, FencingToken: tk.FencingToken, Result: json.RawMessage(`"ok"`)})
		if err == nil {
			if !ack.Accepted {
				t.Fatalf("completion of %s not accepted", tk.TaskID)
			}
			return
		}
		if !errors.Is(err, domain.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("complete %s: %v", tk.TaskID, err)
		}
		time.Sleep(rpc.Backoff(attempt, 20*time.Millisecond, time.Second, err)) // the client's retry advice
	}
}

// waitCaughtUp waits until a follows leader and has applied what the
// leader had committed when the wait began.
func (c *cluster) waitCaughtUp(a, leader *agent) {
	c.t.Helper()
	ls := c.status(leader)
	if ls == nil {
		c.t.Fatalf("%s does not answer", leader.id)
	}
	// another process's replication
	testutil.Eventually(c.t, 30*time.Second, 50*time.Millisecond, fmt.Sprintf("%s to catch up with %s (commit index %d)", a.id, leader.id, ls.CommitIndex), func() error {
		st := c.status(a)
		if st != nil && st.State == "follower" && st.LeaderID == leader.id && st.AppliedIndex >= ls.CommitIndex {
			return nil
		}
		return fmt.Errorf("%+v", st)
	})
}

// stop ends an agent gracefully (SIGTERM) and waits for it to exit.
func (c *cluster) stop(a *agent) {
	c.t.Helper()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(20 * time.Second):
		c.t.Fatalf("%s did not stop within 20s of SIGTERM", a.id)
	}
	a.log.Close()
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
