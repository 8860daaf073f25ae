package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// Orchestration verbs, queues, admission and breakers against three real
// agents (see docs/semantics.md). The FSM-level tests in fsm/ cover each
// rule exhaustively; these prove the product does it end to end.

func ctx30() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// claimOne claims until worker gets one task of types (30 s at most). A
// -32004 answer (no leader yet, or the agent lost the leader while the
// claim was out) is what a worker's loop backs off from and claims again
// after: the client re-sends the claim's request id then, so leases the
// lost answer held come back.
func claimOne(t *testing.T, c *rpc.Client, worker string, types ...string) rpc.Claimed {
	t.Helper()
	ctx, cancel := ctx30()
	defer cancel()
	for attempt := 0; ctx.Err() == nil; attempt++ {
		got, err := c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: worker, Types: types, WaitMS: 5000})
		if errors.Is(err, domain.ErrUnavailable) {
			d := rpc.Backoff(attempt, 20*time.Millisecond, time.Second, err)
			t.Logf("claim answered %v; claiming again after %v", err, d)
			backoff := time.NewTimer(d)
			select {
			case <-backoff.C:
			case <-ctx.Done():
				backoff.Stop()
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 {
			return got[0]
		}
	}
	t.Fatalf("%s claimed nothing", worker)
	return rpc.Claimed{}
}

// noClaim proves nothing is dispatchable for types within a bounded wait.
func noClaim(t *testing.T, c *rpc.Client, types ...string) {
	t.Helper()
	ctx, cancel := ctx30()
	defer cancel()
	got, err := c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "probe", Types: types, WaitMS: 700})
	if err != nil || len(got) != 0 {
		t.Fatalf("claimed %v (%v), expected nothing dispatchable", got, err)
	}
}

func verb(t *testing.T, c *rpc.Client, method, id string) bool {
	t.Helper()
	ctx, cancel := ctx30()
	defer cancel()
	res, err := c.RunVerb(ctx, method, id, "")
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return res.Changed
}

func complete(t *testing.T, c *rpc.Client, cl rpc.Claimed) bool {
	t.Helper()
	ctx, cancel := ctx30()
	defer cancel()
	ack, err := c.TaskComplete(ctx, rpc.CompleteParams{TaskID: cl.TaskID, FencingToken: cl.FencingToken, Result: json.RawMessage(`"ok"`)})
	if err != nil {
		t.Fatal(err)
	}
	return ack.Accepted
}

func TestFailingCompensationEndsRunFailed(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	startWorker(t, c, "wc")
	wf := strings.Replace(string(workflow(t, "saga.yaml")), `"amount":420`, `"amount":420,"fail_refund":true`, 1)
	// Two compensation attempts, quickly (the default policy would retry
	// the failing refund for minutes).
	wf = strings.Replace(wf, `"revert_type":"refund"`, `"retry":{"max_attempts":2,"initial_backoff_ms":10},"revert_type":"refund"`, 1)
	id := submit(t, cl, json.RawMessage(wf))
	if r := waitRun(t, cl, id, 30*time.Second); r.State != domain.RunFailed {
		t.Fatalf("run %s, want failed (its refund compensation fails)", r.State)
	}
	charge := task(t, cl, id+"/charge-card")
	hotel := task(t, cl, id+"/reserve-hotel")
	if charge.State != domain.TaskFailed || !strings.Contains(charge.Error, "compensation failed") || hotel.State != domain.TaskReverted {
		t.Fatalf("charge %s %q, hotel %s (the other compensation still runs)", charge.State, charge.Error, hotel.State)
	}
}

func TestInterruptHoldsDispatchResumeContinues(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	id := submit(t, cl, json.RawMessage(`{"tasks":[{"key":"first","type":"step"},{"key":"second","type":"step","deps":["first"]}]}`))
	first := claimOne(t, cl, "w", "step")
	if !verb(t, cl, rpc.MethodRunInterrupt, id) {
		t.Fatal("interrupt did not change the run")
	}
	if !complete(t, cl, first) { // a running task may finish; its result is kept
		t.Fatal("completion of the running task rejected during interrupt")
	}
	noClaim(t, cl, "step") // second is ready but nothing new is dispatched
	if tk := task(t, cl, id+"/second"); tk.State != domain.TaskReady {
		t.Fatalf("second is %s", tk.State)
	}
	if !verb(t, cl, rpc.MethodRunResume, id) {
		t.Fatal("resume did not change the run")
	}
	complete(t, cl, claimOne(t, cl, "w", "step"))
	if r := waitRun(t, cl, id, 10*time.Second); r.State != domain.RunSucceeded {
		t.Fatalf("run %s", r.State)
	}
}

func TestCancelRevokesRunningLease(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	id := submit(t, cl, json.RawMessage(`{"tasks":[{"key":"a","type":"step"},{"key":"b","type":"step"},{"key":"c","type":"step","deps":["a"]}]}`))
	a := claimOne(t, cl, "w", "step")
	if !verb(t, cl, rpc.MethodRunCancel, id) {
		t.Fatal("cancel did not change the run")
	}
	ctx, cancel := ctx30()
	defer cancel()
	hb, err := cl.TaskHeartbeat(ctx, a.TaskID, a.FencingToken)
	if err != nil || hb.Accepted {
		t.Fatalf("heartbeat after cancel: %+v %v", hb, err)
	}
	if complete(t, cl, a) {
		t.Fatal("late completion accepted after cancel")
	}
	r, _ := cl.RunGet(ctx, id)
	for _, tk := range r.Tasks {
		if tk.State != domain.TaskCancelled {
			t.Fatalf("task %s is %s after cancel", tk.Key, tk.State)
		}
	}
	if r.State != domain.RunCancelled || verb(t, cl, rpc.MethodRunCancel, id) {
		t.Fatalf("run %s; a second cancel must change nothing", r.State)
	}
}

func TestReplayWithAndWithoutReuse(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	startWorker(t, c, "wr")
	parent := submit(t, cl, workflow(t, "flaky.yaml"))
	waitRun(t, cl, parent, 30*time.Second)
	ctx, cancel := ctx30()
	defer cancel()
	plain, err := cl.RunReplay(ctx, rpc.ReplayParams{ID: parent})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, cl, plain.ID, 30*time.Second)
	if r.ParentID != parent || r.ReplayOf != parent || r.State != domain.RunSucceeded || task(t, cl, plain.ID+"/call-api").Attempt != 3 {
		t.Fatalf("plain replay: %+v", r)
	}
	reuse, err := cl.RunReplay(ctx, rpc.ReplayParams{ID: parent, ReuseSucceeded: true})
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, cl, reuse.ID, 30*time.Second)
	api := task(t, cl, reuse.ID+"/call-api")
	if !api.Reused || len(api.Attempts) != 0 || string(api.Result) != string(task(t, cl, parent+"/call-api").Result) {
		t.Fatalf("reused task: %+v", api)
	}
}

func TestQueueCapUnderFiftyClaimers(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cl.QueueSet(ctx, "capq", 3); err != nil {
		t.Fatal(err)
	}
	// Count running tasks of capq at every event of the replicated stream.
	sub := c.client(c.agents[2])
	var mu sync.Mutex
	running, peak, seen := 0, 0, 0
	var violation error
	sub.OnNotify(func(method string, params json.RawMessage) {
		var ev rpc.Event
		if method != rpc.NotifyEvent || json.Unmarshal(params, &ev) != nil || ev.Kind != "task" || ev.Queue != "capq" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ev.To == "running":
			running++
		case ev.From == "running":
			running--
		}
		seen++
		peak = max(peak, running)
		if running > 3 && violation == nil {
			violation = fmt.Errorf("event %d: %d tasks of capq running (cap 3)", ev.Index, running)
		}
	})
	if _, err := sub.EventsSubscribe(ctx, rpc.SubscribeParams{}); err != nil {
		t.Fatal(err)
	}
	const runs = 40
	for i := 0; i < runs; i++ {
		submit(t, cl, json.RawMessage(`{"tasks":[{"key":"t","type":"capt","queue":"capq"}]}`))
	}
	var done sync.WaitGroup
	var completed sync.Map
	var count int64
	var cmu sync.Mutex
	for w := 0; w < 50; w++ {
		done.Add(1)
		go func(w int) {
			defer done.Done()
			wc := c.client()
			for {
				cmu.Lock()
				finished := count >= runs
				cmu.Unlock()
				if finished || ctx.Err() != nil {
					return
				}
				got, err := wc.TaskClaim(ctx, rpc.ClaimParams{WorkerID: fmt.Sprint("w", w), Queues: []string{"capq"}, WaitMS: 1000})
				if err != nil {
					return
				}
				for _, g := range got {
					ack, err := wc.TaskComplete(ctx, rpc.CompleteParams{TaskID: g.TaskID, FencingToken: g.FencingToken})
					if err == nil && ack.Accepted {
						completed.Store(g.TaskID, true)
						cmu.Lock()
						count++
						cmu.Unlock()
					}
				}
			}
		}(w)
	}
	done.Wait()
	if count != runs {
		t.Fatalf("%d of %d tasks completed", count, runs)
	}
	// Let the stream catch up with the last completion.
	_ = testutil.Poll(10*time.Second, 20*time.Millisecond, "the stream's last event", func() error {
		mu.Lock()
		n := seen
		mu.Unlock()
		if n >= 2*runs {
			return nil
		}
		return fmt.Errorf("%d of %d events seen", n, 2*runs)
	})
	mu.Lock()
	defer mu.Unlock()
	if violation != nil {
		t.Fatal(violation)
	}
	if peak != 3 || seen < 2*runs {
		t.Fatalf("peak %d running (want exactly the cap, 3), %d events seen", peak, seen)
	}
}

func TestPerRunQueuePause(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	a := submit(t, cl, json.RawMessage(`{"tasks":[{"key":"t","type":"pt","queue":"pq"}]}`))
	b := submit(t, cl, json.RawMessage(`{"tasks":[{"key":"t","type":"pt","queue":"pq"}]}`))
	ctx, cancel := ctx30()
	defer cancel()
	if res, err := cl.QueuePause(ctx, "pq", a, true); err != nil || !res.Changed {
		t.Fatalf("pause: %+v %v", res, err)
	}
	got := claimOne(t, cl, "w", "pt")
	if got.RunID != b {
		t.Fatalf("claimed %s's task while pq was paused for it", got.RunID)
	}
	noClaim(t, cl, "pt")
	if _, err := cl.QueuePause(ctx, "pq", a, false); err != nil {
		t.Fatal(err)
	}
	if got := claimOne(t, cl, "w", "pt"); got.RunID != a {
		t.Fatalf("after resume claimed %s", got.RunID)
	}
}

func TestAdmissionFIFOAndReject(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	ctx, cancel := ctx30()
	defer cancel()
	one := 1
	if _, err := cl.SettingsSet(ctx, rpc.Settings{MaxRunningRuns: &one}); err != nil {
		t.Fatal(err)
	}
	wf := json.RawMessage(`{"tasks":[{"key":"t","type":"adm"}]}`)
	r1, r2, r3 := submit(t, cl, wf), submit(t, cl, wf), submit(t, cl, wf)
	for id, want := range map[string]domain.RunState{r1: domain.RunRunning, r2: domain.RunPending, r3: domain.RunPending} {
		if r, _ := cl.RunGet(ctx, id); r.State != want {
			t.Fatalf("run %s is %s, want %s", id, r.State, want)
		}
	}
	_, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: wf, IfFull: "reject"})
	var re *rpc.Error
	if !errors.As(err, &re) || re.Code != -32005 || !errors.Is(err, domain.ErrTooManyRuns) {
		t.Fatalf("reject: %v", err)
	}
	for _, want := range []string{r1, r2, r3} { // FIFO: each starts when the previous finishes
		got := claimOne(t, cl, "w", "adm")
		if got.RunID != want {
			t.Fatalf("dispatched %s, want %s (admission is FIFO)", got.RunID, want)
		}
		complete(t, cl, got)
	}
}

func TestBreakerAcrossFailover(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	two, cool := 2, int64(1500)
	if _, err := cl.SettingsSet(ctx, rpc.Settings{BreakerFailures: &two, BreakerCooldownMS: &cool}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		submit(t, cl, json.RawMessage(`{"tasks":[{"key":"t","type":"brk"}]}`))
	}
	no := false
	for i := 0; i < 2; i++ {
		g := claimOne(t, cl, "w", "brk")
		if _, err := cl.TaskFail(ctx, rpc.FailParams{TaskID: g.TaskID, FencingToken: g.FencingToken, Error: "down", Retryable: &no}); err != nil {
			t.Fatal(err)
		}
	}
	breaker := func() string {
		q, err := cl.QueueList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range q.Breakers {
			if b.Type == "brk" {
				return b.State
			}
		}
		return "closed"
	}
	if s := breaker(); s != "open" {
		t.Fatalf("breaker %s after 2 failures", s)
	}
	noClaim(t, cl, "brk") // ready tasks, open breaker: nothing dispatched
	leader := c.waitLeader()
	c.kill9(leader)
	c.waitLeader(leader)
	survivors := c.client(c.followers(leader)...)
	// After the cool-down (leader-stamped time, replicated state) the new
	// leader half-opens the breaker: exactly one trial task goes out.
	trial := claimOne(t, survivors, "w", "brk")
	if s := breaker(); s != "half_open" {
		t.Fatalf("breaker %s during the trial", s)
	}
	noClaim(t, survivors, "brk")
	complete(t, survivors, trial)
	if s := breaker(); s != "closed" {
		t.Fatalf("breaker %s after a successful trial", s)
	}
	complete(t, survivors, claimOne(t, survivors, "w", "brk"))
}

func TestFanOutHundred(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	startWorker(t, c, "wf")
	wf := strings.Replace(string(workflow(t, "fanout.yaml")), `"items":20`, `"items":100`, 1)
	id := submit(t, cl, json.RawMessage(wf))
	if r := waitRun(t, cl, id, 60*time.Second); r.State != domain.RunSucceeded || r.TaskCount != 102 {
		t.Fatalf("run %s with %d tasks", r.State, r.TaskCount)
	}
	var res struct{ Count int }
	_ = json.Unmarshal(task(t, cl, id+"/join").Result, &res)
	if res.Count != 100 {
		t.Fatalf("join saw %d children's results", res.Count)
	}
}

func TestRetentionGCRemovesOnlyOldFinishedRuns(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old := submit(t, cl, json.RawMessage(`{"tasks":[{"key":"t","type":"gc"}]}`))
	complete(t, cl, claimOne(t, cl, "w", "gc"))
	active := submit(t, cl, json.RawMessage(`{"tasks":[{"key":"t","type":"gc-later"}]}`))
	ret := int64(1500)
	if _, err := cl.SettingsSet(ctx, rpc.Settings{RetentionMS: &ret}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := cl.RunGet(ctx, old)
		if errors.Is(err, domain.ErrNotFound) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("finished run older than retention never removed")
		}
		time.Sleep(200 * time.Millisecond) // the leader's GC loop runs every few seconds
	}
	if r, err := cl.RunGet(ctx, active); err != nil || r.State != domain.RunRunning {
		t.Fatalf("running run touched by GC: %+v %v", r, err)
	}
}
