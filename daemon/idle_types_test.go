package daemon

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// A run whose ready task has a type no worker claims is flagged on a
// follower (which asks the leader's registry), and is not once a worker
// claims that type and stays in contact (here: heartbeating the task it
// took, while the run's second task of the type waits for a slot).
func TestWaitingForWorkerThroughFollower(t *testing.T) {
	agents := startAgents(t, 3)
	const after = time.Second
	for _, a := range agents {
		a.workers.idleAfter.Store(int64(after))
	}
	_, fs := followers(agents)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reader, workerSide := client(t, fs[0]), client(t, fs[len(fs)-1])
	res, err := reader.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(
		`{"tasks":[{"key":"a","type":"nobody"},{"key":"b","type":"nobody"},{"key":"c","type":"served","queue":"q2"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	// A worker claiming "served" from another queue does not serve q2:
	// types count per queue.
	go func() {
		for ctx.Err() == nil {
			_, _ = workerSide.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "other", Queues: []string{"elsewhere"}, Types: []string{"served"}, WaitMS: 200})
		}
	}()
	var run *rpc.Run
	testutil.EventuallyTrue(t, 10*time.Second, 50*time.Millisecond, "waiting_for_worker names the ready tasks' types", func() bool {
		if run, err = reader.RunGet(ctx, res.ID); err != nil {
			t.Fatal(err)
		}
		return len(run.WaitingForWorker) > 0
	})
	if want := []string{"nobody", "served"}; !slices.Equal(run.WaitingForWorker, want) || run.WaitingForWorkerNote != "" {
		t.Fatalf("before any worker claims them: waiting_for_worker %q (note %q), want %q", run.WaitingForWorker, run.WaitingForWorkerNote, want)
	}

	// A worker takes one "nobody" task (through the other follower) and
	// heartbeats it; the second one is still ready, but its type is served.
	tasks, err := workerSide.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "w1", Types: []string{"nobody"}, Max: 1, WaitMS: 2000, Slots: 4})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %v %v", tasks, err)
	}
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			_, _ = workerSide.TaskHeartbeat(ctx, tasks[0].TaskID, tasks[0].FencingToken)
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
	}()
	testutil.EventuallyTrue(t, 5*time.Second, 10*time.Millisecond, "the served type leaves waiting_for_worker", func() bool {
		run, err = reader.RunGet(ctx, res.ID)
		return err == nil && slices.Equal(run.WaitingForWorker, []string{"served"})
	})
	if run.WaitingForWorkerNote != "" {
		t.Fatalf("note %q with a reachable leader", run.WaitingForWorkerNote)
	}
	// workers.list (through a follower) names the worker with its filter,
	// slots and last claim.
	wl, err := reader.WorkersList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(wl.Workers, func(w rpc.Worker) bool { return w.ID == "w1" })
	if i < 0 || !slices.Equal(wl.Workers[i].Types, []string{"nobody"}) || wl.Workers[i].Slots != 4 || wl.Workers[i].LastClaim.IsZero() || wl.Workers[i].InFlight != 1 {
		t.Fatalf("workers.list: %+v", wl.Workers)
	}
	if !wl.ServedKnown || wl.IdleTypeAfterMS != after.Milliseconds() {
		t.Fatalf("workers.list served_known %v idle_type_after_ms %d", wl.ServedKnown, wl.IdleTypeAfterMS)
	}
}

// The learning window starts when the leader takes office, not at the first
// read: once the leader has led for --idle-type-after, the very first
// run.get of a run on a type no worker ever served flags it.
func TestWaitingForWorkerWindowStartsAtOffice(t *testing.T) {
	agents := startAgents(t, 3)
	const after = 300 * time.Millisecond
	for _, a := range agents {
		a.workers.idleAfter.Store(int64(after))
	}
	ld, _ := followers(agents)
	since := func() time.Time {
		ld.workers.mu.Lock()
		defer ld.workers.mu.Unlock()
		return ld.workers.since
	}
	// Nothing has read the leader's worker list or claimed from it.
	testutil.EventuallyTrue(t, 5*time.Second, 10*time.Millisecond, "the leader's registry notes when it took office", func() bool {
		return !since().IsZero()
	})
	testutil.EventuallyTrue(t, 5*time.Second, 10*time.Millisecond, "the leader has led for --idle-type-after", func() bool {
		return time.Since(since()) >= after
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := client(t, ld)
	res, err := c.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"never"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.RunGet(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(run.WaitingForWorker, []string{"never"}) || run.WaitingForWorkerNote != "" {
		t.Fatalf("first read after the leader led for %v: waiting_for_worker %q, note %q", after, run.WaitingForWorker, run.WaitingForWorkerNote)
	}
	if len(run.Tasks) != 1 || run.Tasks[0].WaitingOn == nil || run.Tasks[0].WaitingOn.Reason != "no_worker" ||
		run.Tasks[0].WaitingOn.Command != "flowd worker run --type never --exec CMD" {
		t.Fatalf("task waiting_on %+v", run.Tasks[0].WaitingOn)
	}
}
