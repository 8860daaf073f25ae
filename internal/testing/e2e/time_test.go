package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/rpc"
)

// Delayed start, task timeouts and signals against three real agents (the
// FSM tests in fsm/semantics_time_test.go and semantics_signal_test.go
// cover each rule; these prove the product does it end to end).

func TestTimeLimitsAndSignals(t *testing.T) {
	c := startCluster(t, 3)
	t.Run("delayed start survives a leader kill and starts no earlier than its time", func(t *testing.T) {
		leader := c.waitLeader()
		cl := c.client(leader)
		wf := json.RawMessage(`{"name":"later","tasks":[{"key":"a","type":"delayed"}]}`)
		ctx, cancel := ctx30()
		defer cancel()
		before := time.Now()
		res, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: wf, DelayMS: 2000})
		if err != nil {
			t.Fatal(err)
		}
		r, err := cl.RunGet(ctx, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != "pending" || !r.Scheduled || r.StartAt.Before(before.Add(2*time.Second-50*time.Millisecond)) {
			t.Fatalf("delayed run %+v", r)
		}
		c.kill9(leader)
		defer c.restart(leader)
		rest := c.client(c.followers(leader)...)
		got := claimOne(t, rest, "w", "delayed")
		claimedAt := time.Now()
		if claimedAt.Before(r.StartAt) {
			t.Fatalf("claimed at %v, before the start time %v", claimedAt, r.StartAt)
		}
		run, err := rest.RunGet(ctx, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		if run.StartedAt.Before(r.StartAt) || run.Scheduled {
			t.Fatalf("run started at %v, scheduled for %v (%+v)", run.StartedAt, r.StartAt, run)
		}
		if !complete(t, rest, got) {
			t.Fatal("completion rejected")
		}
	})

	t.Run("a task past timeout_ms fails and is retried; the stalled worker's completion is rejected", func(t *testing.T) {
		cl := c.client()
		wf := json.RawMessage(`{"name":"bounded","tasks":[{"key":"a","type":"bounded","timeout_ms":1200,"lease_ms":600,
			"retry":{"max_attempts":2,"initial_backoff_ms":10}}]}`)
		id := submit(t, cl, wf)
		stalled := claimOne(t, cl, "stalled", "bounded")
		if stalled.TimeoutMS != 1200 || stalled.DeadlineAt.IsZero() {
			t.Fatalf("claim without its deadline: %+v", stalled)
		}
		ctx, cancel := ctx30()
		defer cancel()
		// The worker acknowledges, then keeps heartbeating: the lease is
		// not renewed past the timeout, whatever the worker does.
		deadline := stalled.DeadlineAt
		for {
			ack, err := cl.TaskHeartbeat(ctx, stalled.TaskID, stalled.FencingToken)
			if err != nil {
				t.Fatal(err)
			}
			if !ack.Accepted {
				break
			}
			if ack.LeaseExpiresAt.After(deadline) {
				t.Fatalf("lease renewed to %v, past the attempt's deadline %v", ack.LeaseExpiresAt, deadline)
			}
			if time.Now().After(deadline.Add(10 * time.Second)) {
				t.Fatal("heartbeats still accepted 10 s after the timeout")
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(200 * time.Millisecond): // the heartbeat cadence, not a race widener
			}
		}
		second := claimOne(t, cl, "fresh", "bounded")
		if second.Attempt != 2 || second.FencingToken <= stalled.FencingToken {
			t.Fatalf("retry %+v", second)
		}
		if complete(t, cl, stalled) {
			t.Fatal("the stalled worker's late completion was accepted")
		}
		tk := task(t, cl, id+"/a")
		if len(tk.Attempts) < 1 || tk.Attempts[0].Outcome != "timed_out" || !strings.Contains(tk.Attempts[0].Error, "timeout_ms 1200") {
			t.Fatalf("first attempt %+v", tk.Attempts)
		}
		if !complete(t, cl, second) {
			t.Fatal("the retry's completion was rejected")
		}
		if r := waitRun(t, cl, id, 10*time.Second); r.State != "succeeded" {
			t.Fatalf("run %s", r.State)
		}
	})

	t.Run("flowd run signal completes a wait task and its dependent receives the payload", func(t *testing.T) {
		cl := c.client()
		wf := json.RawMessage(`{"name":"approval","tasks":[{"key":"approve","type":"wait","timeout_ms":60000},
			{"key":"ship","type":"shipper","deps":["approve"]}]}`)
		id := submit(t, cl, wf)
		if tk := task(t, cl, id+"/approve"); !tk.Waiting || tk.State != "ready" || tk.DeadlineAt.IsZero() {
			t.Fatalf("wait task %+v", tk)
		}
		noClaim(t, cl, "wait") // nobody claims a wait task
		args := []string{"--addr", strings.Join(c.endpoints(), ","), "run", "signal", "--data", `{"approved_by":"ann"}`, id, "approve"}
		out, err := exec.Command(flowdBin, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "signal delivered") {
			t.Fatalf("flowd run signal: %v\n%s", err, out)
		}
		got := claimOne(t, cl, "w", "shipper")
		if got.TaskKey != "ship" || string(got.DepResults["approve"]) != `{"approved_by":"ann"}` {
			t.Fatalf("dependent claim %+v", got)
		}
		// A second signal finds nothing waiting.
		out, err = exec.Command(flowdBin, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "not waiting") {
			t.Fatalf("second signal: %v\n%s", err, out)
		}
		if !complete(t, cl, got) {
			t.Fatal("completion rejected")
		}
		if r := waitRun(t, cl, id, 10*time.Second); r.State != "succeeded" {
			t.Fatalf("run %s", r.State)
		}
	})
}
