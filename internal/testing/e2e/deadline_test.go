package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A run's deadline_ms and a task's schedule_to_start_ms against three real
// agents (fsm/semantics_time_test.go covers each rule): the deadline is a
// replicated timer, so it fires under the leader elected after a kill -9
// of the one that armed it.

func TestRunDeadlineAndScheduleToStart(t *testing.T) {
	c := startCluster(t, 3)

	t.Run("a run past deadline_ms is cancelled across a leader kill -9", func(t *testing.T) {
		leader := c.waitLeader()
		cl := c.client(leader)
		id := submit(t, cl, json.RawMessage(`{"name":"bounded-run","deadline_ms":3000,"tasks":[
			{"key":"a","type":"dl-cancel","lease_ms":30000},{"key":"b","type":"dl-cancel","deps":["a"]}]}`))
		stalled := claimOne(t, cl, "stalled", "dl-cancel")
		ctx, cancel := ctx30()
		defer cancel()
		r, err := cl.RunGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.DeadlineMS != 3000 || !r.DeadlineAt.Equal(r.StartedAt.Add(3*time.Second)) {
			t.Fatalf("run deadline %d at %v, started %v", r.DeadlineMS, r.DeadlineAt, r.StartedAt)
		}
		if !time.Now().Before(r.DeadlineAt) {
			t.Fatalf("the leader was not killed before the deadline %v", r.DeadlineAt)
		}
		c.kill9(leader)
		defer c.restart(leader)
		rest := c.client(c.followers(leader)...)
		run := waitRun(t, rest, id, 15*time.Second)
		if run.State != "cancelled" || !strings.Contains(run.Reason, "deadline_ms 3000") || run.FinishedAt.Before(r.DeadlineAt) {
			t.Fatalf("run %s (%q) finished %v, deadline %v", run.State, run.Reason, run.FinishedAt, r.DeadlineAt)
		}
		for _, key := range []string{"a", "b"} {
			if tk := task(t, rest, id+"/"+key); tk.State != "cancelled" {
				t.Fatalf("task %s is %s", key, tk.State)
			}
		}
		if complete(t, rest, stalled) {
			t.Fatal("the stalled worker's completion after the deadline was accepted")
		}
	})

	t.Run("a run past deadline_ms with on_failure revert is reverted across a leader kill -9", func(t *testing.T) {
		leader := c.waitLeader()
		cl := c.client(leader)
		id := submit(t, cl, json.RawMessage(`{"name":"bounded-saga","on_failure":"revert","deadline_ms":3000,"tasks":[
			{"key":"book","type":"dl-book","revert_type":"dl-unbook"},
			{"key":"pay","type":"dl-pay","deps":["book"],"lease_ms":30000}]}`))
		if !complete(t, cl, claimOne(t, cl, "w", "dl-book")) {
			t.Fatal("book's completion rejected")
		}
		stalled := claimOne(t, cl, "stalled", "dl-pay")
		ctx, cancel := ctx30()
		defer cancel()
		r, err := cl.RunGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !time.Now().Before(r.DeadlineAt) {
			t.Fatalf("the leader was not killed before the deadline %v", r.DeadlineAt)
		}
		c.kill9(leader)
		defer c.restart(leader)
		rest := c.client(c.followers(leader)...)
		undo := claimOne(t, rest, "w", "dl-unbook")
		if claimedAt := time.Now(); claimedAt.Before(r.DeadlineAt) || !undo.Compensation || undo.TaskKey != "book" {
			t.Fatalf("compensation claim %+v at %v, deadline %v", undo, claimedAt, r.DeadlineAt)
		}
		if run, err := rest.RunGet(ctx, id); err != nil || run.State != "reverting" || !strings.Contains(run.Reason, "deadline_ms 3000") {
			t.Fatalf("run while compensating: %+v (%v)", run, err)
		}
		if complete(t, rest, stalled) {
			t.Fatal("pay's late completion after the deadline was accepted")
		}
		if !complete(t, rest, undo) {
			t.Fatal("the compensation's completion was rejected")
		}
		if run := waitRun(t, rest, id, 10*time.Second); run.State != "reverted" {
			t.Fatalf("run %s (%q)", run.State, run.Reason)
		}
		if tk := task(t, rest, id+"/book"); tk.State != "reverted" {
			t.Fatalf("book is %s", tk.State)
		}
	})

	t.Run("a task left unclaimed past schedule_to_start_ms fails with a timeout", func(t *testing.T) {
		c.waitLeader()
		cl := c.client()
		unclaimed := submit(t, cl, json.RawMessage(`{"name":"unclaimed","tasks":[
			{"key":"a","type":"dl-nobody","schedule_to_start_ms":1000},{"key":"b","type":"dl-nobody","deps":["a"]}]}`))
		// The same bound on a task claimed in time does nothing.
		served := submit(t, cl, json.RawMessage(`{"name":"served","tasks":[
			{"key":"a","type":"dl-served","schedule_to_start_ms":1000,"lease_ms":30000}]}`))
		held := claimOne(t, cl, "w", "dl-served")
		run := waitRun(t, cl, unclaimed, 10*time.Second)
		tk := task(t, cl, unclaimed+"/a")
		if run.State != "failed" || tk.State != "failed" || len(tk.Attempts) != 0 ||
			!strings.Contains(tk.Error, "schedule_to_start") || tk.FinishedAt.Sub(tk.ReadyAt) < time.Second {
			t.Fatalf("run %s; task %s (%q), %d attempts, ready %v, finished %v", run.State, tk.State, tk.Error, len(tk.Attempts), tk.ReadyAt, tk.FinishedAt)
		}
		if b := task(t, cl, unclaimed+"/b"); b.State != "cancelled" {
			t.Fatalf("dependent b is %s", b.State)
		}
		noClaim(t, cl, "dl-nobody")
		if !complete(t, cl, held) {
			t.Fatal("the task claimed in time was failed by its schedule_to_start_ms")
		}
		if r := waitRun(t, cl, served, 10*time.Second); r.State != "succeeded" {
			t.Fatalf("served run %s", r.State)
		}
	})
}
