package fsm

import "testing"

// holdOf is the hold Holds reports for run's task key ("" reason: none),
// and the run's own.
func (h *harness) holdOf(run, key string) (Hold, *Hold) {
	h.t.Helper()
	r, tasks, err := h.f.GetRun(run)
	if err != nil {
		h.t.Fatal(err)
	}
	rh, holds, err := h.f.Holds(r, tasks, h.now)
	if err != nil {
		h.t.Fatal(err)
	}
	return holds[key], rh
}

func (h *harness) wantHold(run, key, reason string) Hold {
	h.t.Helper()
	got, _ := h.holdOf(run, key)
	if got.Reason != reason {
		h.t.Fatalf("%s/%s: hold %+v, want reason %q", run, key, got, reason)
	}
	return got
}

// Why a ready task is not claimed, read from the state in the dispatcher's
// order: each hold named while it holds, gone when lifted.
func TestHoldsNameWhatKeepsATaskFromItsClaim(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t"}]}`)
	h.wantHold("r", "a", "") // nothing holds it: a worker's claim takes it

	// A pause for the run comes before the queue's own pause.
	h.ok(&QueuePause{Name: "default", Paused: true})
	h.wantHold("r", "a", HoldQueuePaused)
	h.ok(&QueuePause{Name: "default", RunID: "r", Paused: true})
	h.wantHold("r", "a", HoldRunPaused)
	if q := h.queueState("default"); q.Ready != 0 || q.PausedReady != 1 {
		t.Fatalf("queue with the run's task paused for it: ready %d paused_ready %d, want 0 and 1", q.Ready, q.PausedReady)
	}
	h.ok(&QueuePause{Name: "default", RunID: "r", Paused: false})
	h.ok(&QueuePause{Name: "default", Paused: false})
	h.wantHold("r", "a", "")

	// Interrupted: the run's reason, on its ready task too.
	h.verb(MsgInterrupt, "r")
	if got, rh := h.holdOf("r", "a"); rh == nil || rh.Reason != HoldInterrupted || got.Reason != HoldInterrupted {
		t.Fatalf("interrupted: run hold %+v, task hold %+v", rh, got)
	}
	h.verb(MsgResume, "r")

	// A cap: one running task of the queue holds the second.
	h.ok(&QueueSet{Name: "default", Concurrency: 1})
	h.submit("s", `{"tasks":[{"key":"b","type":"t"}]}`)
	h.claim("w", 1)
	if got := h.wantHold("s", "b", HoldConcurrency); got.Limit != 1 || got.Count != 1 {
		t.Fatalf("cap hold %+v", got)
	}
	h.ok(&QueueSet{Name: "default", Concurrency: 0})

	// An open breaker holds its type until the cool-down, then lets a trial.
	one, cool := 1, int64(10_000)
	h.ok(&SettingsSet{BreakerFailures: &one, BreakerCooldownMS: &cool})
	h.submit("f", `{"tasks":[{"key":"x","type":"bad"}]}`)
	h.fail(h.claim("w", 1, "bad")[0], "boom", false)
	h.submit("g", `{"tasks":[{"key":"y","type":"bad"}]}`)
	if got := h.wantHold("g", "y", HoldBreakerOpen); got.Until != h.now+cool || got.Failures != 1 {
		t.Fatalf("breaker hold %+v (now %d)", got, h.now)
	}
	h.now += cool
	h.wantHold("g", "y", "")

	// A rate limit: the bucket's next token.
	h.ok(&RateLimitSet{Queue: "rq", RateMilli: 1_000, Burst: 1})
	h.submit("q", `{"tasks":[{"key":"c","type":"t","queue":"rq"},{"key":"d","type":"t","queue":"rq"}]}`)
	h.claim("w", 5, "t") // s/b, then c: the bucket's one token
	if got := h.wantHold("q", "d", HoldRateLimit); got.Until <= h.now || got.Rate == "" {
		t.Fatalf("rate hold %+v (now %d)", got, h.now)
	}
}

// A pending run's roots carry the run's reason: a delayed start, or
// admission while the cap on running runs is reached.
func TestHoldsOfAPendingRun(t *testing.T) {
	h := newSem(t)
	capOne := 1
	h.ok(&SettingsSet{MaxRunningRuns: &capOne})
	h.submit("a", `{"tasks":[{"key":"x","type":"t"}]}`)
	h.submit("b", `{"tasks":[{"key":"x","type":"t"},{"key":"y","type":"t","deps":["x"]}]}`)
	got, rh := h.holdOf("b", "x")
	if rh == nil || rh.Reason != HoldAdmission || rh.Limit != 1 || rh.Count != 1 || got.Reason != HoldAdmission {
		t.Fatalf("admission: run hold %+v, root hold %+v", rh, got)
	}
	if dep, _ := h.holdOf("b", "y"); dep.Reason != "" {
		t.Fatalf("a dependent task of a pending run: hold %+v, want none", dep)
	}
}
