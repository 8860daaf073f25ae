package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

const pairWorkflow = `{"name":"pair","tasks":[{"key":"a","type":"echo"},{"key":"b","type":"echo","deps":["a"]}]}`

// claimAndComplete claims one task through c and completes it, as a
// worker does across a failover: a -32004 (no leader yet, or a claim whose
// forward lost its leader mid-call and so has an unknown outcome) is
// retried after rpc.Backoff; the client re-sends the claim's request id,
// so it is answered any lease the lost call made, and a completion repeats
// safely by its token.
func claimAndComplete(t *testing.T, ctx context.Context, c *rpc.Client, worker string) rpc.Claimed {
	t.Helper()
	attempt := 0
	retry := func(what string, err error) {
		if !errors.Is(err, domain.ErrUnavailable) {
			t.Fatalf("%s: %v", what, err)
		}
		d := rpc.Backoff(attempt, 20*time.Millisecond, time.Second, err)
		attempt++
		t.Logf("%s answered %v; again after %v", what, err, d)
		backoff := time.NewTimer(d)
		defer backoff.Stop()
		select {
		case <-backoff.C:
		case <-ctx.Done():
			t.Fatalf("%s: %v (the test's deadline passed)", what, err)
		}
	}
	for {
		tasks, err := c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: worker, WaitMS: 3000})
		if err != nil {
			retry("claim", err)
			continue
		}
		if len(tasks) == 0 {
			if ctx.Err() != nil {
				t.Fatal("no task to claim")
			}
			continue
		}
		for {
			ack, err := c.TaskComplete(ctx, rpc.CompleteParams{TaskID: tasks[0].TaskID, FencingToken: tasks[0].FencingToken,
				Result: json.RawMessage(`{"by":"` + worker + `"}`)})
			if err != nil {
				retry("complete "+tasks[0].TaskID, err)
				continue
			}
			if !ack.Accepted {
				t.Fatalf("complete %s: not accepted", tasks[0].TaskID)
			}
			return tasks[0]
		}
	}
}

// sameState asserts every agent reports the same digest at the same index.
func sameState(t *testing.T, c *cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// replication progress of external processes
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, "the agents to reach the same applied index", func() error {
		var first *rpc.DigestResult
		var applied []uint64
		same := true
		for _, a := range c.agents {
			d, err := c.client(a).ClusterDigest(ctx)
			if err != nil {
				t.Fatal(err)
			}
			applied = append(applied, d.AppliedIndex)
			if first == nil {
				first = d
			} else if d.AppliedIndex != first.AppliedIndex {
				same = false // still replicating; look again
			} else if d.Digest != first.Digest {
				t.Fatalf("%s diverged at index %d", a.id, d.AppliedIndex)
			}
		}
		if same {
			return nil
		}
		return fmt.Errorf("applied %v", applied)
	})
}

func TestSubmitViaFollowerClaimViaAnother(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.waitLeader()
	fs := c.followers(leader)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := c.client(fs[0]).RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(pairWorkflow), ID: "0193a000-0000-7000-8000-000000000001"})
	if err != nil || !sub.Created {
		t.Fatalf("submit: %+v %v", sub, err)
	}
	worker := c.client(fs[1])
	claimAndComplete(t, ctx, worker, "w1")
	claimAndComplete(t, ctx, worker, "w1")
	w, err := c.client(fs[0]).RunWait(ctx, sub.ID, 10000)
	if err != nil || !w.Done || w.Run.State != domain.RunSucceeded {
		t.Fatalf("wait: %+v %v", w, err)
	}
	sameState(t, c)
	for _, a := range c.agents {
		r, err := c.client(a).RunGet(ctx, sub.ID)
		if err != nil || r.State != domain.RunSucceeded || len(r.Tasks) != 2 {
			t.Fatalf("%s: %+v %v", a.id, r, err)
		}
	}
}

func TestKill9LeaderMidRun(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := c.client()
	var ids []string
	for i := 0; i < 5; i++ {
		sub, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(pairWorkflow), ID: fmt.Sprintf("0193a000-0000-7000-8000-%012d", i+1)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sub.ID)
	}
	claimAndComplete(t, ctx, cl, "w1") // some progress before the crash
	c.kill9(leader)
	t0 := time.Now()
	survivors := c.followers(leader)
	wc := c.client(survivors...)
	first := claimAndComplete(t, ctx, wc, "w2")
	t.Logf("failover: kill -9 of the leader to the next successful claim+complete: %v", time.Since(t0).Round(time.Millisecond))
	done := map[string]int{first.TaskID: 1}
	for len(done) < 9 {
		got := claimAndComplete(t, ctx, wc, "w2")
		done[got.TaskID]++
	}
	for id, n := range done {
		if n != 1 {
			t.Fatalf("task %s completed %d times", id, n)
		}
	}
	for _, id := range ids {
		w, err := wc.RunWait(ctx, id, 10000)
		if err != nil || w.Run.State != domain.RunSucceeded {
			t.Fatalf("run %s: %+v %v", id, w, err)
		}
		for _, tk := range w.Run.Tasks {
			if tk.State != domain.TaskSucceeded {
				t.Fatalf("run %s task %s %s", id, tk.Key, tk.State)
			}
		}
	}
	// Nothing doubled: every task has exactly one successful attempt.
	for _, id := range ids {
		for _, key := range []string{"a", "b"} {
			tk, err := wc.TaskGet(ctx, id+"/"+key)
			if err != nil {
				t.Fatal(err)
			}
			ok := 0
			for _, at := range tk.Attempts {
				if at.Outcome == "succeeded" {
					ok++
				}
			}
			if ok != 1 {
				t.Fatalf("%s/%s has %d successful attempts", id, key, ok)
			}
		}
	}
	c.restart(leader)
	sameState(t, c)
}

func TestBadInputCatalogueSameConnection(t *testing.T) {
	c := startCluster(t, 3)
	a := c.agents[0]
	r := dialRaw(t, a.sock)
	ok := func() {
		t.Helper()
		m := r.send(`{"jsonrpc":"2.0","id":99,"method":"cluster.status"}`)
		if errCode(m) != 0 || m["result"] == nil {
			t.Fatalf("connection unusable after bad input: %v", m)
		}
	}
	cases := []struct {
		name, line string
		code       int
	}{
		{"invalid JSON", `{"jsonrpc":"2.0","id":1,"method":`, -32700},
		{"over-long line", `{"jsonrpc":"2.0","id":2,"method":"cluster.status","params":{"pad":"` + strings.Repeat("x", 4<<20+10) + `"}}`, -32006},
		{"non-2.0 request", `{"jsonrpc":"1.0","id":3,"method":"cluster.status"}`, -32600},
		{"unknown method", `{"jsonrpc":"2.0","id":4,"method":"run.explode"}`, -32601},
		{"invalid params", `{"jsonrpc":"2.0","id":5,"method":"run.get","params":{"id":42}}`, -32602},
		{"cyclic spec", `{"jsonrpc":"2.0","id":6,"method":"run.submit","params":{"workflow":{"tasks":[{"key":"a","type":"t","deps":["b"]},{"key":"b","type":"t","deps":["a"]}]}}}`, -32003},
		{"unknown dependency", `{"jsonrpc":"2.0","id":7,"method":"run.submit","params":{"workflow":{"tasks":[{"key":"a","type":"t","deps":["nope"]}]}}}`, -32003},
		{"unknown run id", `{"jsonrpc":"2.0","id":8,"method":"run.get","params":{"id":"0193a000-0000-7000-8000-00000000dead"}}`, -32001},
	}
	for _, tc := range cases {
		m := r.send(tc.line)
		if got := errCode(m); got != tc.code {
			t.Fatalf("%s: code %d, want %d (%v)", tc.name, got, tc.code, m["error"])
		}
		ok()
	}
	// The cycle is named, with a path.
	m := r.send(cases[5].line)
	var e struct {
		Data struct {
			Problems []struct{ Code, Path, Message string }
		}
	}
	raw, _ := json.Marshal(m["error"])
	_ = json.Unmarshal(raw, &e)
	if len(e.Data.Problems) != 1 || e.Data.Problems[0].Code != "cycle" || e.Data.Problems[0].Path != "tasks[0].deps" ||
		!strings.Contains(e.Data.Problems[0].Message, "a -> b -> a") {
		t.Fatalf("cycle problem not named with its path: %s", raw)
	}
	// A wrong fencing token is a lost race, not an error.
	sub := r.send(`{"jsonrpc":"2.0","id":10,"method":"run.submit","params":{"workflow":` + pairWorkflow + `}}`)
	id := sub["result"].(map[string]any)["id"].(string)
	claim := r.send(`{"jsonrpc":"2.0","id":11,"method":"task.claim","params":{"worker_id":"raw","wait_ms":3000}}`)
	tasks := claim["result"].(map[string]any)["tasks"].([]any)
	if len(tasks) != 1 {
		t.Fatalf("claim: %v", claim)
	}
	tk := tasks[0].(map[string]any)
	token := uint64(tk["fencing_token"].(float64))
	m = r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":12,"method":"task.complete","params":{"task_id":%q,"fencing_token":%d}}`, tk["task_id"], token+1000))
	if errCode(m) != 0 || m["result"].(map[string]any)["accepted"] != false {
		t.Fatalf("wrong token: %v", m)
	}
	ok()
	_ = id
}

func TestSocatOneShot(t *testing.T) {
	if _, err := exec.LookPath("socat"); err != nil {
		t.Fatal("socat is required (make deps installs it)")
	}
	c := startCluster(t, 3)
	out, err := exec.Command("sh", "-c", `echo '{"jsonrpc":"2.0","id":1,"method":"cluster.status"}' | socat - UNIX-CONNECT:`+c.agents[1].sock).Output()
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		ID     int               `json:"id"`
		Result rpc.ClusterStatus `json:"result"`
	}
	if err := json.Unmarshal(out, &m); err != nil || m.ID != 1 || m.Result.NodeID != "n2" || len(m.Result.Peers) != 3 {
		t.Fatalf("one-shot reply %q: %v", out, err)
	}
}
