package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// The polyglot exec worker: a shell script gets the task on stdin, its
// stdout is the result, a non-zero exit fails the attempt with its stderr,
// exit 100 fails it for good.
func TestExecWorker(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatal("jq is required (make deps installs it)")
	}
	c := startCluster(t, 3)
	cl := c.client()
	script := filepath.Join(t.TempDir(), "handler.sh")
	os.WriteFile(script, []byte(`#!/bin/sh
in=$(cat)
case $(printf '%s' "$in" | jq -r .type) in
  ok)   printf '%s' "$in" | jq -c '{doubled: (.input.n * 2), key: .idempotency_key, env: env.FLOWD_TASK_KEY}' ;;
  bad)  echo "something broke on attempt $FLOWD_ATTEMPT" >&2; exit 3 ;;
  perm) echo "never works" >&2; exit 100 ;;
esac
`), 0o755)
	w := exec.Command(flowdBin, "--addr", strings.Join(c.endpoints(), ","), "worker", "run", "--exec", script,
		"--type", "ok", "--type", "bad", "--type", "perm", "--concurrency", "2", "--id", "execw")
	w.Stderr = os.Stderr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Process.Kill(); _ = w.Wait() }()
	one := func(task string) string {
		id := submit(t, cl, json.RawMessage(`{"tasks":[`+task+`]}`))
		waitRun(t, cl, id, 30*time.Second)
		return id
	}
	ok := one(`{"key":"o","type":"ok","input":{"n":21}}`)
	bad := one(`{"key":"b","type":"bad","retry":{"max_attempts":2,"initial_backoff_ms":10}}`)
	perm := one(`{"key":"p","type":"perm","retry":{"max_attempts":3}}`)
	o, b, p := task(t, cl, ok+"/o"), task(t, cl, bad+"/b"), task(t, cl, perm+"/p")
	id := ok
	var res struct {
		Doubled int
		Key     string
		Env     string
	}
	_ = json.Unmarshal(o.Result, &res)
	if o.State != domain.TaskSucceeded || res.Doubled != 42 || res.Key != id+"/o/1" || res.Env != "o" {
		t.Fatalf("ok task: %s %s", o.State, o.Result)
	}
	if b.State != domain.TaskFailed || b.Attempt != 2 || !strings.Contains(b.Error, "something broke on attempt 2") {
		t.Fatalf("bad task: %s attempt %d %q", b.State, b.Attempt, b.Error)
	}
	if p.State != domain.TaskFailed || p.Attempt != 1 || !strings.Contains(p.Error, "never works") {
		t.Fatalf("permanent task: %s attempt %d %q", p.State, p.Attempt, p.Error)
	}
}

// A client never waits past its wait_ms plus a small margin, even when the
// cluster has no leader: it gets -32004 with retry_after_ms.
func TestNoQuorumLongPollsEndOnTime(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.waitLeader()
	fs := c.followers(leader)
	c.kill9(leader)
	c.kill9(fs[0])
	survivor := fs[1]
	// Leadership may have moved between waitLeader and the kills: should
	// the survivor be the leader, it steps down once it misses a quorum
	// (leader lease). The calls below are about a cluster with no leader.
	// readiness polling of an external process
	testutil.EventuallyTrue(t, 10*time.Second, 50*time.Millisecond, "the survivor to stop leading without a quorum", func() bool {
		st := c.status(survivor)
		return st != nil && st.State != "leader"
	})
	cl := c.client(survivor)
	for _, call := range []func(ctx context.Context) error{
		func(ctx context.Context) error {
			_, err := cl.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "w", WaitMS: 1000})
			return err
		},
		func(ctx context.Context) error {
			_, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(pairWorkflow)})
			return err
		},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t0 := time.Now()
		err := call(ctx)
		took := time.Since(t0)
		cancel()
		var re *rpc.Error
		if !errors.As(err, &re) || re.Code != -32004 || re.RetryAfter() <= 0 {
			t.Fatalf("without quorum: %v", err)
		}
		if took > 11*time.Second {
			t.Fatalf("call took %v", took)
		}
		t.Logf("answered -32004 after %v: %s", took.Round(time.Millisecond), re.Message)
	}
}
