package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/rpc"
)

// flowd run retry re-runs only the failed task of a failed run (the
// succeeded one keeps its result, its attempt history is kept) and the
// run succeeds; a retry of a run that has not ended is refused.
func TestRunRetryCommand(t *testing.T) {
	tc := startCluster(t)
	c := tc.client(t)
	wf := writeFile(t, "wf.yaml", "name: retry\ntasks:\n  - {key: a, type: echo}\n  - {key: b, type: flaky, deps: [a]}\n")
	tc.startWorker(t, "echo")
	id := tc.submitID(t, wf)
	if r := tc.flowd(t, "run", "retry", id); r.code == 0 || !strings.Contains(r.err, "has not ended") {
		t.Fatalf("retry of a running run:\n%s", r)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	claim := func() rpc.Claimed {
		for {
			tasks, err := c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "w", Types: []string{"flaky"}, Max: 1, WaitMS: 5000})
			if err != nil {
				t.Fatal(err)
			}
			if len(tasks) == 1 {
				return tasks[0]
			}
		}
	}
	b := claim()
	no := false
	if _, err := c.TaskFail(ctx, rpc.FailParams{TaskID: b.TaskID, FencingToken: b.FencingToken, Error: "down", Retryable: &no}); err != nil {
		t.Fatal(err)
	}
	if w, err := c.RunWait(ctx, id, 10_000); err != nil || w.Run.State != "failed" {
		t.Fatalf("run before retry: %+v %v", w, err)
	}
	tc.sync(t)
	// The dead-letter view lists the failed task.
	if r := tc.must(t, 0, "task", "list", "--state", "failed", "--workflow", "retry"); !strings.Contains(r.out, id[len(id)-12:]+"/b") ||
		!strings.Contains(r.out, "✗ failed") || !strings.Contains(r.out, "down") || strings.Contains(r.out, "/a ") {
		t.Fatalf("task list:\n%s", r)
	}
	r := tc.must(t, 0, "run", "retry", id, "--task", "b")
	if !strings.Contains(r.out, "retried: b again, now ● running") {
		t.Fatalf("retry output:\n%s", r)
	}
	b = claim()
	if b.TaskKey != "b" || b.Attempt != 2 {
		t.Fatalf("claimed after retry: %+v", b)
	}
	if _, err := c.TaskComplete(ctx, rpc.CompleteParams{TaskID: b.TaskID, FencingToken: b.FencingToken, Result: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if w, err := c.RunWait(ctx, id, 10_000); err != nil || w.Run.State != "succeeded" {
		t.Fatalf("run after retry: %+v %v", w, err)
	}
	tk, err := c.TaskGet(ctx, id+"/a")
	if err != nil || tk.Attempt != 1 {
		t.Fatalf("the succeeded task ran again: %+v %v", tk, err)
	}
	tk, err = c.TaskGet(ctx, id+"/b")
	if err != nil || len(tk.Attempts) != 2 || tk.Attempts[0].Error != "down" {
		t.Fatalf("b's history: %+v %v", tk, err)
	}
	tc.sync(t)
	if r := tc.must(t, 0, "task", "list", "--state", "failed", "--workflow", "retry"); !strings.Contains(r.out, "no tasks") {
		t.Fatalf("task list after the retry:\n%s", r)
	}

	// Bulk: every failed run of a workflow.
	ids := []string{tc.submitID(t, wf), tc.submitID(t, wf)}
	for range ids {
		b := claim()
		if _, err := c.TaskFail(ctx, rpc.FailParams{TaskID: b.TaskID, FencingToken: b.FencingToken, Error: "down", Retryable: &no}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if w, err := c.RunWait(ctx, id, 10_000); err != nil || w.Run.State != "failed" {
			t.Fatalf("run before the bulk retry: %+v %v", w, err)
		}
	}
	tc.sync(t)
	if r := tc.must(t, 0, "run", "retry", "--all-failed", "--workflow", "retry"); !strings.Contains(r.out, "2 failed run(s) of retry retried") {
		t.Fatalf("bulk retry:\n%s", r)
	}
	if r := tc.flowd(t, "run", "retry", "--all-failed"); r.code != 2 {
		t.Fatalf("--all-failed without --workflow:\n%s", r)
	}
}
