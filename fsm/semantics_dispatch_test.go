package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// Semantics of dispatch: queue caps, priorities, pauses, admission,
// breakers, fan-out, retention.

// queueRunning counts, from the task records, the leases held in a queue.
func queueRunning(t testing.TB, f *FSM, queue string) int {
	t.Helper()
	n := 0
	err := f.View(func(r Reader) error {
		return r.Scan(pfxTask, nil, false, func(_, v []byte) bool {
			var tk Task
			if err := unmarshal(v, &tk); err != nil {
				t.Fatal(err)
			}
			if tk.Queue == queue && tk.Leased() {
				n++
			}
			return true
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func queueState(t testing.TB, f *FSM, name string) QueueInfo {
	t.Helper()
	qs, err := f.Queues()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("no queue %s", name)
	return QueueInfo{}
}

func manyTasks(n int, queue, typ string) string {
	var b strings.Builder
	b.WriteString(`{"tasks":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"key":"t%03d","type":%q,"queue":%q,"retry":{"max_attempts":100}}`, i, typ, queue)
	}
	b.WriteString("]}")
	return b.String()
}

func TestQueueConcurrencyCapNeverExceeded(t *testing.T) {
	h := newSem(t)
	h.ok(&SettingsSet{BreakerFailures: ptr(-1)}) // reaps below must not open a breaker
	h.ok(&QueueSet{Name: "q", Concurrency: 3})
	h.submit("r", manyTasks(60, "q", "work"))
	h.submit("other", manyTasks(5, "free", "work")) // another queue is not capped
	check := func() {
		t.Helper()
		n := queueRunning(t, h.f, "q")
		if n > 3 {
			t.Fatalf("%d tasks of queue q running, cap 3", n)
		}
		if q := queueState(t, h.f, "q"); q.Running != n {
			t.Fatalf("QueueState.Running = %d, task records say %d", q.Running, n)
		}
	}
	// 50 waiters in one claim entry.
	waiters := make([]Waiter, 50)
	for i := range waiters {
		waiters[i] = Waiter{WorkerID: fmt.Sprintf("w%d", i), Queues: []string{"q"}, Max: 1 + i%4}
	}
	res := h.ok(&Claim{Waiters: waiters}).(*ClaimResult)
	var live []Claimed
	for _, a := range res.Assigned {
		live = append(live, a...)
	}
	if len(live) != 3 {
		t.Fatalf("one claim of 50 waiters assigned %d tasks, want 3", len(live))
	}
	check()
	if got := h.claim("free", 10); len(got) != 5 {
		t.Fatalf("uncapped queue: %d claimed, want 5", len(got))
	}
	// Across many claims, finishing tasks in random order.
	rng := rand.New(rand.NewPCG(1, 2))
	done := 0
	for step := 0; done < 60; step++ {
		if step > 5000 {
			t.Fatal("no progress")
		}
		if len(live) > 0 && rng.IntN(2) == 0 {
			i := rng.IntN(len(live))
			if rng.IntN(5) == 0 {
				h.now += 30_001 // leases expire: reaped, retried after their backoff
				h.ok(&Reap{})
				h.ok(&Tick{})
			} else if !h.complete(live[i], "1") {
				t.Fatalf("complete %s rejected", live[i].TaskID)
			} else {
				done++
			}
			live = slices.Delete(live, i, i+1)
			live = slices.DeleteFunc(live, func(c Claimed) bool { return !h.task("r", c.TaskKey).Leased() })
		} else {
			ws := make([]Waiter, 1+rng.IntN(50))
			for j := range ws {
				ws[j] = Waiter{WorkerID: fmt.Sprintf("w%d", j), Max: 1 + rng.IntN(3)}
			}
			got := 0
			for _, a := range h.ok(&Claim{Waiters: ws}).(*ClaimResult).Assigned {
				for _, c := range a {
					got++
					if c.Queue == "q" {
						live = append(live, c)
					}
				}
			}
			if got == 0 { // everything left is backing off after a reap
				h.now += domain.DefaultMaxBackoffMS
				h.ok(&Tick{})
			}
		}
		check()
	}
	h.wantRun("r", domain.RunSucceeded)
}

func TestPriorityThenFIFO(t *testing.T) {
	h := newSem(t)
	h.submit("r1", `{"tasks":[
	 {"key":"p0a","type":"t","queue":"p"},
	 {"key":"p5a","type":"t","queue":"p","priority":5},
	 {"key":"p0b","type":"u","queue":"p2"},
	 {"key":"p5b","type":"u","queue":"p","priority":5},
	 {"key":"p9","type":"t","queue":"p2","priority":9}]}`)
	h.submit("r2", `{"tasks":[{"key":"p5c","type":"t","queue":"p","priority":5},{"key":"p0c","type":"t","queue":"p"}]}`)
	var order []string
	for {
		got := h.claim("w", 1)
		if len(got) == 0 {
			break
		}
		order = append(order, got[0].RunID+"/"+got[0].TaskKey)
	}
	want := []string{"r1/p9", "r1/p5a", "r1/p5b", "r2/p5c", "r1/p0a", "r1/p0b", "r2/p0c"}
	if !slices.Equal(order, want) {
		t.Fatalf("dispatch order %v, want %v", order, want)
	}
}

func TestQueuePauseGlobalAndPerRun(t *testing.T) {
	h := newSem(t)
	h.submit("r1", `{"tasks":[{"key":"a","type":"t","queue":"q"},{"key":"b","type":"t","queue":"other"}]}`)
	h.submit("r2", `{"tasks":[{"key":"a","type":"t","queue":"q"}]}`)
	// Global pause of q: only the other queue dispatches.
	if !h.ok(&QueuePause{Name: "q", Paused: true}).(*ChangedResult).Changed {
		t.Fatal("pause: not changed")
	}
	got := h.claim("w", 10)
	if len(got) != 1 || got[0].Queue != "other" {
		t.Fatalf("claimed %+v with q paused", got)
	}
	h.complete(got[0], "1")
	h.wantNoClaim("w")
	if !queueState(t, h.f, "q").Paused || h.f.HasReady(Waiter{Queues: []string{"q"}}, h.now) {
		t.Fatal("queue q not reported paused")
	}
	h.ok(&QueuePause{Name: "q", Paused: false})
	// Per-run pause of q for r1: r2's task still dispatches.
	if !h.ok(&QueuePause{Name: "q", RunID: "r1", Paused: true}).(*ChangedResult).Changed {
		t.Fatal("per-run pause: not changed")
	}
	got = h.claim("w", 10)
	if len(got) != 1 || got[0].RunID != "r2" {
		t.Fatalf("claimed %+v with q paused for r1", got)
	}
	h.wantNoClaim("w")
	if tk := h.task("r1", "a"); tk.State != domain.TaskReady || tk.Indexed {
		t.Fatalf("r1/a while paused for its run: %+v", tk)
	}
	h.ok(&QueuePause{Name: "q", RunID: "r1", Paused: false})
	got = h.claim("w", 10)
	if len(got) != 1 || got[0].RunID != "r1" {
		t.Fatalf("after per-run resume: %+v", got)
	}
	h.complete(got[0], "1")
	h.wantRun("r1", domain.RunSucceeded)
}

func TestAdmissionCapFIFOAndReject(t *testing.T) {
	h := newSem(t)
	h.ok(&SettingsSet{MaxRunningRuns: ptr(2)})
	one := `{"tasks":[{"key":"a","type":"t"}]}`
	for _, id := range []string{"r1", "r2"} {
		if res := h.submit(id, one); res.State != domain.RunRunning {
			t.Fatalf("%s: %+v", id, res)
		}
	}
	for _, id := range []string{"r3", "r4"} {
		if res := h.submit(id, one); res.State != domain.RunPending || !res.Created {
			t.Fatalf("%s over the cap: %+v", id, res)
		}
	}
	spec, _ := domain.ParseSpec([]byte(one), domain.DefaultLimits)
	before := stateDigest(t, h.f)
	res := h.apply(&Submit{ID: "r5", Spec: spec, IfFull: "reject"})
	err, isErr := res.(error)
	if !isErr || !errors.Is(err, domain.ErrTooManyRuns) || !errors.Is(err, ErrTooManyRuns) {
		t.Fatalf("reject when full: %#v", res)
	}
	if stateDigest(t, h.f) != before {
		t.Fatal("a rejected submission changed state")
	}
	if got := h.claim("w", 10); len(got) != 2 || got[0].RunID != "r1" || got[1].RunID != "r2" {
		t.Fatalf("claims %+v", got)
	} else {
		h.complete(got[0], "1") // r1 finishes: r3 (first in line) starts
		h.wantRun("r1", domain.RunSucceeded)
		h.wantRun("r3", domain.RunRunning)
		h.wantRun("r4", domain.RunPending)
		h.verb(MsgCancelRun, "r2") // a cancelled run frees its slot too
		h.wantRun("r4", domain.RunRunning)
	}
	h.submit("r6", one)
	h.submit("r7", one)
	h.wantRun("r6", domain.RunPending)
	h.ok(&SettingsSet{MaxRunningRuns: ptr(3)})
	h.wantRun("r6", domain.RunRunning)
	h.wantRun("r7", domain.RunPending)
	h.ok(&SettingsSet{MaxRunningRuns: ptr(0)}) // unlimited
	h.wantRun("r7", domain.RunRunning)
	c, _ := h.f.Counters()
	if c.ActiveRuns != 4 {
		t.Fatalf("active runs %d, want 4 (r3 r4 r6 r7)", c.ActiveRuns)
	}
	if res := h.ok(&Submit{ID: "r8", Spec: spec, IfFull: "reject"}).(*SubmitResult); res.State != domain.RunRunning {
		t.Fatalf("r8: %+v", res)
	}
	// A run cancelled while waiting for admission never starts.
	h.ok(&SettingsSet{MaxRunningRuns: ptr(1)})
	h.submit("r9", one)
	h.wantRun("r9", domain.RunPending)
	if !h.verb(MsgCancelRun, "r9") {
		t.Fatal("cancel of a pending run: not changed")
	}
	h.ok(&SettingsSet{MaxRunningRuns: ptr(0)})
	h.wantRun("r9", domain.RunCancelled)
	h.wantTasks("r9", map[string]domain.TaskState{"a": domain.TaskCancelled})
	if !hasTransition(runEvents(h, "r9"), "run", "", domain.EdgeCancelBeforeStart) {
		t.Fatal("no cancel_before_start event")
	}
}

func breakerOf(t testing.TB, f *FSM, typ string) Breaker {
	t.Helper()
	bs, err := f.Breakers()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Type == typ {
			return b
		}
	}
	return Breaker{Type: typ, State: BreakerClosed}
}

func TestBreakerOpensHalfOpensAndCloses(t *testing.T) {
	h := newSem(t)
	h.ok(&SettingsSet{BreakerFailures: ptr(3), BreakerCooldownMS: ptr(int64(10_000))})
	for i := 0; i < 12; i++ {
		h.submit(fmt.Sprintf("f%02d", i), `{"tasks":[{"key":"x","type":"flaky","retry":{"max_attempts":1}}]}`)
	}
	h.submit("ok", `{"tasks":[{"key":"y","type":"fine"}]}`)
	evFrom := h.index + 1
	for i := 0; i < 3; i++ {
		if b := breakerOf(t, h.f, "flaky"); b.State != BreakerClosed {
			t.Fatalf("breaker %s after %d failures", b.State, i)
		}
		h.fail(h.claimOne("w"), "down", true)
	}
	if b := breakerOf(t, h.f, "flaky"); b.State != BreakerOpen || b.Failures != 3 {
		t.Fatalf("after 3 failures: %+v", b)
	}
	// Open: flaky tasks are ready but skipped; other types still dispatch.
	got := h.claim("w", 20)
	if len(got) != 1 || got[0].Type != "fine" {
		t.Fatalf("claims with the breaker open: %+v", claimKeys(got))
	}
	if q := queueState(t, h.f, domain.DefaultQueue); q.Types["flaky"] != 9 {
		t.Fatalf("ready flaky tasks %d, want 9", q.Types["flaky"])
	}
	h.now += 9_999
	h.ok(&Tick{})
	h.wantNoClaim("w")
	halfOpen := func() {
		t.Helper()
		h.now += 10_000
		if n := h.ok(&Tick{}).(*CountResult).Count; n != 1 {
			t.Fatalf("tick half-opened %d breakers", n)
		}
		if b := breakerOf(t, h.f, "flaky"); b.State != BreakerHalfOpen {
			t.Fatalf("after cool-down: %+v", b)
		}
	}
	halfOpen()
	trial := h.claim("w", 20)
	if len(trial) != 1 {
		t.Fatalf("half-open dispatched %d tasks, want exactly 1", len(trial))
	}
	h.wantNoClaim("w")
	h.fail(trial[0], "still down", true) // the trial fails: open again
	if b := breakerOf(t, h.f, "flaky"); b.State != BreakerOpen {
		t.Fatalf("after failed trial: %+v", b)
	}
	h.wantNoClaim("w")
	halfOpen()
	trial = h.claim("w", 20)
	if len(trial) != 1 {
		t.Fatalf("half-open dispatched %d tasks, want exactly 1", len(trial))
	}
	h.complete(trial[0], "1") // the trial succeeds: closed
	if b := breakerOf(t, h.f, "flaky"); b.State != BreakerClosed || b.Failures != 0 {
		t.Fatalf("after successful trial: %+v", b)
	}
	if got := h.claim("w", 20); len(got) != 7 {
		t.Fatalf("closed breaker dispatched %d, want the 7 left", len(got))
	}
	evs, _, _ := h.f.Events(evFrom, "", 0)
	var trail []string
	for _, e := range evs {
		if e.Kind == "breaker" && e.Type == "flaky" {
			trail = append(trail, e.From+">"+e.To)
		}
	}
	want := []string{"closed>open", "open>half_open", "half_open>open", "open>half_open", "half_open>closed"}
	if !slices.Equal(trail, want) {
		t.Fatalf("breaker events %v, want %v", trail, want)
	}
}

func TestFanOutFanIn(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"split","type":"t"},{"key":"join","type":"t","deps":["split"]}]}`)
	split := h.claimOne("w")
	children := make([]domain.TaskSpec, 100)
	for i := range children {
		children[i] = domain.TaskSpec{Key: fmt.Sprintf("c%03d", i), Type: "work", Input: json.RawMessage(fmt.Sprint(i))}
	}
	ack := h.ok(&Complete{TaskID: split.TaskID, Token: split.FencingToken, Result: json.RawMessage(`"parts"`), Spawn: children}).(*AckResult)
	if !ack.Accepted {
		t.Fatal("spawning completion rejected")
	}
	r, ts := h.run("r")
	if r.Tasks() != 102 || len(ts) != 102 || ts["join"].State != domain.TaskPending || len(ts["join"].Deps) != 101 {
		t.Fatalf("after spawn: count %d tasks %d join %+v", r.Tasks(), len(ts), ts["join"])
	}
	var claimed []Claimed
	for len(claimed) < 100 {
		got := h.claim("w", 1+len(claimed)%37, "work")
		if len(got) == 0 {
			t.Fatalf("only %d children dispatched", len(claimed))
		}
		claimed = append(claimed, got...)
	}
	for i, c := range claimed {
		if string(c.DepResults["split"]) != `"parts"` {
			t.Fatalf("child %s dep results %v", c.TaskKey, c.DepResults)
		}
		if j, _ := h.f.GetTask("r/join"); j.State != domain.TaskPending {
			t.Fatalf("join ready after %d of 100 children", i)
		}
		h.complete(c, `"done-`+c.TaskKey+`"`)
	}
	join := h.claimOne("w")
	if join.TaskKey != "join" || len(join.DepResults) != 101 || string(join.DepResults["split"]) != `"parts"` {
		t.Fatalf("join claim: %s with %d dep results", join.TaskKey, len(join.DepResults))
	}
	for _, ch := range children {
		if got := string(join.DepResults[ch.Key]); got != `"done-`+ch.Key+`"` {
			t.Fatalf("join dep result of %s = %s", ch.Key, got)
		}
	}
	h.complete(join, "1")
	h.wantRun("r", domain.RunSucceeded)
}

func TestSpawnValidationRejectsWholeCompletion(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"split","type":"t"},{"key":"join","type":"t","deps":["split"]}]}`)
	split := h.claimOne("w")
	before := stateDigest(t, h.f)
	bad := map[string][]domain.TaskSpec{
		"duplicate key":        {{Key: "c1", Type: "w"}, {Key: "c1", Type: "w"}},
		"key of an existing":   {{Key: "join", Type: "w"}},
		"unknown dependency":   {{Key: "c1", Type: "w", Deps: []string{"ghost"}}},
		"cycle among siblings": {{Key: "c1", Type: "w", Deps: []string{"c2"}}, {Key: "c2", Type: "w", Deps: []string{"c1"}}},
	}
	for name, spawn := range bad {
		res := h.apply(&Complete{TaskID: split.TaskID, Token: split.FencingToken, Result: json.RawMessage(`1`), Spawn: spawn})
		if err, isErr := res.(error); !isErr || !errors.Is(err, domain.ErrInvalidSpec) {
			t.Fatalf("%s: result %#v, want an invalid-spec error", name, res)
		}
		if stateDigest(t, h.f) != before {
			t.Fatalf("%s: the rejected completion changed state", name)
		}
	}
	if tk := h.task("r", "split"); tk.State != domain.TaskRunning || tk.Result != nil || tk.FencingToken != split.FencingToken {
		t.Fatalf("split after rejected completions: %+v", tk)
	}
	if !h.heartbeat(split) {
		t.Fatal("lease lost by a rejected completion")
	}
	ok := []domain.TaskSpec{{Key: "c1", Type: "w"}, {Key: "c2", Type: "w", Deps: []string{"c1"}}}
	if !h.ok(&Complete{TaskID: split.TaskID, Token: split.FencingToken, Spawn: ok}).(*AckResult).Accepted {
		t.Fatal("valid spawn rejected")
	}
	h.forward("w", "c1", "c2", "join")
	h.wantRun("r", domain.RunSucceeded)
}

func TestGCRemovesOnlyOldFinishedRuns(t *testing.T) {
	h := newSem(t)
	const hour = int64(3600_000)
	h.ok(&SettingsSet{RetentionMS: ptr(hour)})
	one := `{"tasks":[{"key":"a","type":"t"}]}`
	h.submit("old-ok", one)
	h.forward("w", "a")
	h.submit("old-cancelled", one)
	h.verb(MsgCancelRun, "old-cancelled")
	h.submit("old-failed", one)
	h.fail(h.claimOne("w"), "x", false)
	h.submit("running", one)
	h.claimOne("w")
	h.ok(&Reap{}) // nothing due yet
	h.now += 2 * hour
	h.submit("recent", one)
	h.heartbeat(Claimed{TaskID: "running/a", FencingToken: h.task("running", "a").FencingToken})
	h.forward("w", "a")
	h.wantRun("recent", domain.RunSucceeded)
	if !h.f.GCDue(h.now) {
		t.Fatal("GCDue false with old finished runs")
	}
	if n := h.ok(&GC{}).(*CountResult).Count; n != 3 {
		t.Fatalf("gc removed %d runs, want 3", n)
	}
	for _, id := range []string{"old-ok", "old-cancelled", "old-failed"} {
		if _, _, err := h.f.GetRun(id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s still there: %v", id, err)
		}
		if _, err := h.f.GetTask(id + "/a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("task of %s still there: %v", id, err)
		}
	}
	_ = h.f.View(func(r Reader) error {
		return r.Scan(nil, nil, false, func(k, _ []byte) bool {
			if strings.Contains(string(k), "old-") {
				t.Errorf("key %q of a collected run left behind", k)
			}
			return true
		})
	})
	for state, want := range map[domain.RunState][]string{
		domain.RunSucceeded: {"recent"}, domain.RunCancelled: nil, domain.RunFailed: nil, domain.RunRunning: {"running"},
	} {
		runs, _, err := h.f.ListRuns(state, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("ListRuns(%s) = %v, want %v", state, ids, want)
		}
	}
	counts, _ := h.f.CountRuns()
	if counts[domain.RunSucceeded] != 1 || counts[domain.RunRunning] != 1 || len(counts) != 2 {
		t.Fatalf("CountRuns %v", counts)
	}
	if h.f.GCDue(h.now) || h.ok(&GC{}).(*CountResult).Count != 0 {
		t.Fatal("second gc found work")
	}
	h.wantRun("running", domain.RunRunning)
}

// A task still running when its run failed may finish; children it spawns
// then must not stay pending forever in a run that can no longer succeed.
func TestSpawnIntoFailedRunCancelsChildren(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t"},{"key":"join","type":"t","deps":["a"]}]}`)
	got := h.claim("w", 2)
	h.fail(got[1], "fatal", false)
	h.wantRun("r", domain.RunFailed)
	spawn := []domain.TaskSpec{{Key: "c1", Type: "t"}, {Key: "c2", Type: "t", Deps: []string{"c1"}}}
	if !h.ok(&Complete{TaskID: got[0].TaskID, Token: got[0].FencingToken, Result: json.RawMessage(`1`), Spawn: spawn}).(*AckResult).Accepted {
		t.Fatal("completion of a task of a failed run rejected")
	}
	h.wantRun("r", domain.RunFailed)
	h.wantTasks("r", map[string]domain.TaskState{"a": domain.TaskSucceeded, "join": domain.TaskCancelled,
		"c1": domain.TaskCancelled, "c2": domain.TaskCancelled})
	if r, _ := h.run("r"); r.Counts[domain.TaskPending] != 0 {
		t.Fatalf("counts %v: tasks left pending in a failed run", r.Counts)
	}
	h.wantNoClaim("w")
}

// A claim names queues chosen by the worker; one that names a queue nobody
// has used must not create it (unvalidated client input in replicated state).
func TestClaimOnUnknownQueueChangesNothing(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t"}]}`)
	before := stateDigest(t, h.f)
	res := h.ok(&Claim{Waiters: []Waiter{{WorkerID: "w", Queues: []string{"typo", "bad\x00name"}, Max: 5}}}).(*ClaimResult)
	if len(res.Assigned[0]) != 0 {
		t.Fatalf("claimed %+v", res.Assigned[0])
	}
	if stateDigest(t, h.f) != before {
		qs, _ := h.f.Queues()
		t.Fatalf("a claim on unknown queues changed state; queues now %+v", qs)
	}
}

// A claim without a queue filter looks in every queue, including one a
// command earlier in the same group entry created: the entry's list of
// queue names, kept between its claims, is renewed when a queue appears.
func TestClaimInOneEntrySeesAQueueCreatedEarlierInIt(t *testing.T) {
	h := newSem(t)
	h.submit("r0", `{"name":"w","tasks":[{"key":"a","type":"t","queue":"old"}]}`)
	h.claim("w0", 1, "t") // r0's task: "old" is now empty
	enc := h.encode
	spec, err := domain.ParseSpec([]byte(`{"name":"w","tasks":[{"key":"a","type":"t","queue":"fresh"}]}`), domain.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	waiter := []Waiter{{WorkerID: "w1", Types: []string{"t"}, Max: 1}}
	res := h.ok(&Multi{Cmds: [][]byte{
		enc(&Claim{Waiters: waiter}), // finds nothing, and lists the queues
		enc(&Submit{ID: "r1", Spec: spec}),
		enc(&Claim{Waiters: waiter}),
	}}).(*MultiResult)
	if got := res.Results[0].(*ClaimResult).Assigned[0]; len(got) != 0 {
		t.Fatalf("first claim got %v, want nothing", claimKeys(got))
	}
	got := res.Results[2].(*ClaimResult).Assigned[0]
	if len(got) != 1 || got[0].TaskID != "r1/a" {
		t.Fatalf("claim after the submit got %v, want r1/a from the queue the submit created", claimKeys(got))
	}
}
