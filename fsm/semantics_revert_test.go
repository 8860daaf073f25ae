package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// Semantics of the run verbs and the saga, driven through Apply with the
// harness clock. Every test replays its log at the end (see newSem).

func TestSagaRevertChainOrder(t *testing.T) {
	h := newSem(t)
	h.ok(&SettingsSet{BreakerFailures: ptr(-1)})
	h.submit("r", `{"on_failure":"revert","tasks":[
	 {"key":"a","type":"step","revert_type":"undo"},
	 {"key":"b","type":"step","deps":["a"]},
	 {"key":"c","type":"step","deps":["b"],"revert_type":"undo"},
	 {"key":"d","type":"flaky","deps":["c"],"revert_type":"undo","retry":{"max_attempts":2,"initial_backoff_ms":50}}]}`)
	h.forward("w", "a", "b", "c")
	d := h.claimOne("w")
	h.fail(d, "boom", true)
	h.wantRun("r", domain.RunRunning) // one attempt left
	h.wantNoClaim("w")
	h.now = h.task("r", "d").RetryAt
	h.ok(&Tick{})
	d = h.claimOne("w")
	if d.Attempt != 2 {
		t.Fatalf("second attempt: %+v", d)
	}
	h.fail(d, "boom again", true) // attempts exhausted: the saga starts
	h.wantRun("r", domain.RunReverting)
	h.wantTasks("r", map[string]domain.TaskState{"a": domain.TaskReverting, "b": domain.TaskReverting,
		"c": domain.TaskReverting, "d": domain.TaskReverting})
	// Nothing but compensations is dispatched while reverting.
	if got := h.claim("fwd", 10, "step", "flaky"); len(got) != 0 {
		t.Fatalf("forward claim while reverting: %v", claimKeys(got))
	}
	// d, then c; b has no revert_type and is reverted directly as soon as
	// c is, which unblocks a.
	order := h.drainCompensations("r")
	if want := [][]string{{"d"}, {"c"}, {"a"}}; !slices.EqualFunc(order, want, slices.Equal[[]string]) {
		t.Fatalf("compensation order %v, want %v", order, want)
	}
	h.wantRun("r", domain.RunReverted)
	h.wantTasks("r", map[string]domain.TaskState{"a": domain.TaskReverted, "b": domain.TaskReverted,
		"c": domain.TaskReverted, "d": domain.TaskReverted})
	evs := runEvents(h, "r")
	if !hasTransition(evs, "task", "b", domain.EdgeReverted) || hasTransition(evs, "compensation", "b", "claim") {
		t.Fatal("b (no revert_type) must be reverted without a compensation claim")
	}
	if !hasTransition(evs, "run", "", domain.EdgeRevert) || !hasTransition(evs, "run", "", domain.EdgeReverted) {
		t.Fatal("run revert/reverted events missing")
	}
	b := h.task("r", "b")
	if b.Attempts[len(b.Attempts)-1].Compensation {
		t.Fatal("b got a compensation attempt")
	}
}

func TestSagaRevertDiamondOrder(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"on_failure":"revert","tasks":[
	 {"key":"a","type":"step","revert_type":"undo"},
	 {"key":"b","type":"step","deps":["a"],"revert_type":"undo"},
	 {"key":"c","type":"step","deps":["a"],"revert_type":"undo"},
	 {"key":"d","type":"step","deps":["b","c"]}]}`)
	h.forward("w", "a")
	for _, c := range h.claim("w", 2) {
		h.complete(c, `"r`+c.TaskKey+`"`)
	}
	h.fail(h.claimOne("w"), "fatal", false) // d, not retryable
	h.wantRun("r", domain.RunReverting)
	// d has no compensation; b and c run in parallel; a waits for both.
	cs := h.claim("comp", 10, "undo")
	if got := claimKeys(cs); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("first compensations %v, want [b c]", got)
	}
	h.wantTasks("r", map[string]domain.TaskState{"d": domain.TaskReverted})
	for _, c := range cs {
		if c.TaskKey == "b" {
			h.complete(c, "")
		}
	}
	h.wantNoClaim("comp", "undo") // c is still reverting
	if ph := h.task("r", "a").Comp.Phase; ph != CompWaiting {
		t.Fatalf("a compensation phase %s, want waiting", ph)
	}
	for _, c := range cs {
		if c.TaskKey == "c" {
			if string(c.Result) != `"rc"` {
				t.Fatalf("c compensation result %s", c.Result)
			}
			h.complete(c, "")
		}
	}
	if order := h.drainCompensations("r"); len(order) != 1 || !slices.Equal(order[0], []string{"a"}) {
		t.Fatalf("last compensation %v, want [[a]]", order)
	}
	h.wantRun("r", domain.RunReverted)
}

func TestSagaCompensationRetriesThenFailsBestEffort(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"on_failure":"revert","tasks":[
	 {"key":"a","type":"step","revert_type":"undo"},
	 {"key":"b","type":"step","deps":["a"],"revert_type":"undo","retry":{"max_attempts":2,"initial_backoff_ms":100}},
	 {"key":"c","type":"step","deps":["b"]}]}`)
	h.forward("w", "a", "b")
	h.fail(h.claimOne("w"), "fatal", false)
	h.wantRun("r", domain.RunReverting)
	comp := h.claim("comp", 10, "undo")
	if len(comp) != 1 || comp[0].TaskKey != "b" || comp[0].Attempt != 1 {
		t.Fatalf("first compensation: %+v", comp)
	}
	h.fail(comp[0], "undo failed", true)
	b := h.task("r", "b")
	if b.State != domain.TaskReverting || b.Comp.Phase != CompRetrying || b.Comp.RetryAt <= h.now {
		t.Fatalf("b after failed compensation: %+v %+v", b, b.Comp)
	}
	h.wantNoClaim("comp", "undo") // backoff pending; a still waits for b
	h.now = b.Comp.RetryAt - 1
	h.ok(&Tick{})
	h.wantNoClaim("comp", "undo")
	h.now++
	h.ok(&Tick{})
	comp = h.claim("comp", 10, "undo")
	if len(comp) != 1 || comp[0].TaskKey != "b" || comp[0].Attempt != 2 {
		t.Fatalf("retried compensation: %+v", comp)
	}
	h.fail(comp[0], "undo failed again", true) // exhausted
	h.wantTasks("r", map[string]domain.TaskState{"b": domain.TaskFailed, "c": domain.TaskReverted})
	h.wantRun("r", domain.RunReverting) // a's compensation still runs
	if order := h.drainCompensations("r"); len(order) != 1 || !slices.Equal(order[0], []string{"a"}) {
		t.Fatalf("best-effort compensation %v, want [[a]]", order)
	}
	h.wantTasks("r", map[string]domain.TaskState{"a": domain.TaskReverted, "b": domain.TaskFailed})
	h.wantRun("r", domain.RunFailed)
	outcomes := []string{}
	for _, at := range h.task("r", "b").Attempts {
		outcomes = append(outcomes, fmt.Sprintf("%v:%s", at.Compensation, at.Outcome))
	}
	if want := []string{"false:succeeded", "true:failed", "true:failed"}; !slices.Equal(outcomes, want) {
		t.Fatalf("b attempts %v, want %v", outcomes, want)
	}
}

func TestManualRevertRunningRunRevokesLeases(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[
	 {"key":"a","type":"step","revert_type":"undo"},
	 {"key":"b","type":"step","deps":["a"],"revert_type":"undo"}]}`)
	h.forward("w", "a")
	b := h.claimOne("w")
	if !h.verb(MsgRevert, "r") {
		t.Fatal("revert of a running run: not changed")
	}
	h.wantRun("r", domain.RunReverting)
	bt := h.task("r", "b")
	if bt.State != domain.TaskReverting || bt.LeaseOwner != "" || bt.Attempts[0].Outcome != OutcomeRevoked {
		t.Fatalf("b after revert: %+v", bt)
	}
	if h.heartbeat(b) || h.complete(b, `"late"`) || h.fail(b, "late", true) {
		t.Fatal("a write with the revoked token was accepted")
	}
	if r := h.task("r", "b").Result; r != nil {
		t.Fatalf("late result kept: %s", r)
	}
	order := h.drainCompensations("r")
	if want := [][]string{{"b"}, {"a"}}; !slices.EqualFunc(order, want, slices.Equal[[]string]) {
		t.Fatalf("compensation order %v, want %v", order, want)
	}
	h.wantRun("r", domain.RunReverted)
	if h.verb(MsgRevert, "r") || h.verb(MsgCancelRun, "r") || h.verb(MsgResume, "r") || h.verb(MsgInterrupt, "r") {
		t.Fatal("a verb changed a reverted run")
	}
	// A succeeded run cannot be reverted (succeeded is final).
	h.submit("s", `{"tasks":[{"key":"x","type":"step","revert_type":"undo"}]}`)
	h.forward("w", "x")
	if h.verb(MsgRevert, "s") {
		t.Fatal("revert of a succeeded run changed it")
	}
}

func TestManualRevertOfFailedRun(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[
	 {"key":"a","type":"step","revert_type":"undo"},
	 {"key":"c","type":"slow","revert_type":"undo"},
	 {"key":"b","type":"step","deps":["a"]}]}`)
	first := h.claim("w", 2)
	if got := claimKeys(first); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("roots claimed %v", got)
	}
	c := first[1]
	h.complete(first[0], `"ra"`)
	h.fail(h.claimOne("w"), "fatal", false)
	h.wantRun("r", domain.RunFailed)
	h.wantTasks("r", map[string]domain.TaskState{"c": domain.TaskRunning}) // may still finish
	if !h.verb(MsgRevert, "r") {
		t.Fatal("revert of a failed run: not changed")
	}
	h.wantRun("r", domain.RunReverting)
	if h.complete(c, `"late"`) {
		t.Fatal("completion of the revoked lease accepted")
	}
	order := h.drainCompensations("r")
	if want := [][]string{{"a", "c"}}; !slices.EqualFunc(order, want, slices.Equal[[]string]) {
		t.Fatalf("compensation order %v, want %v", order, want)
	}
	h.wantRun("r", domain.RunReverted)
	h.wantTasks("r", map[string]domain.TaskState{"a": domain.TaskReverted, "b": domain.TaskReverted, "c": domain.TaskReverted})
}

func TestInterruptHoldsDispatchAndResumes(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[
	 {"key":"a","type":"step"},
	 {"key":"c","type":"step"},
	 {"key":"b","type":"step","deps":["a"]}]}`)
	a := h.claimOne("w")
	if a.TaskKey != "a" {
		t.Fatalf("claimed %s", a.TaskKey)
	}
	if !h.verb(MsgInterrupt, "r") {
		t.Fatal("interrupt: not changed")
	}
	h.wantRun("r", domain.RunInterrupted)
	h.wantNoClaim("w") // c is ready but held
	if !h.heartbeat(a) || !h.complete(a, `"ra"`) {
		t.Fatal("the running task may finish while interrupted")
	}
	if got := h.task("r", "a"); got.State != domain.TaskSucceeded || string(got.Result) != `"ra"` {
		t.Fatalf("a: %+v", got)
	}
	bt := h.task("r", "b")
	if bt.State != domain.TaskReady || bt.Indexed {
		t.Fatalf("b must be ready but not dispatchable: %+v", bt)
	}
	h.wantNoClaim("w")
	h.wantRun("r", domain.RunInterrupted)
	if h.verb(MsgInterrupt, "r") {
		t.Fatal("second interrupt changed the run")
	}
	if !h.verb(MsgResume, "r") {
		t.Fatal("resume: not changed")
	}
	h.wantRun("r", domain.RunRunning)
	got := h.claim("w", 10)
	if keys := claimKeys(got); !slices.Equal(keys, []string{"b", "c"}) {
		t.Fatalf("after resume claimed %v", keys)
	}
	if string(got[0].DepResults["a"]) != `"ra"` && string(got[1].DepResults["a"]) != `"ra"` {
		t.Fatal("b lost a's result")
	}
	for _, c := range got {
		h.complete(c, "1")
	}
	h.wantRun("r", domain.RunSucceeded)
	if h.verb(MsgResume, "r") {
		t.Fatal("resume of a succeeded run changed it")
	}
}

func TestInterruptRevertingRunThenResume(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"on_failure":"revert","tasks":[
	 {"key":"a","type":"step","revert_type":"undo"},
	 {"key":"b","type":"step","deps":["a"],"revert_type":"undo"},
	 {"key":"c","type":"step","deps":["b"]}]}`)
	h.forward("w", "a", "b")
	h.fail(h.claimOne("w"), "fatal", false)
	h.wantRun("r", domain.RunReverting)
	bc := h.claim("comp", 1, "undo")
	if len(bc) != 1 || bc[0].TaskKey != "b" {
		t.Fatalf("first compensation %v", claimKeys(bc))
	}
	if !h.verb(MsgInterrupt, "r") {
		t.Fatal("interrupt of a reverting run: not changed")
	}
	h.wantRun("r", domain.RunInterrupted)
	if !h.complete(bc[0], "") { // the running compensation may finish
		t.Fatal("compensation completion rejected while interrupted")
	}
	h.wantTasks("r", map[string]domain.TaskState{"b": domain.TaskReverted, "a": domain.TaskReverting})
	h.wantNoClaim("comp", "undo") // a's compensation is held
	h.wantRun("r", domain.RunInterrupted)
	if !h.verb(MsgResume, "r") {
		t.Fatal("resume: not changed")
	}
	h.wantRun("r", domain.RunReverting) // back to reverting, not running
	if order := h.drainCompensations("r"); len(order) != 1 || !slices.Equal(order[0], []string{"a"}) {
		t.Fatalf("after resume: %v", order)
	}
	h.wantRun("r", domain.RunReverted)
}

// Interrupting a reverting run whose next compensation is already ready,
// then reverting it (instead of resuming), must keep reverting: the ready
// compensation is dispatchable again.
func TestRevertVerbOnInterruptedRevertingRun(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"on_failure":"revert","tasks":[
	 {"key":"a","type":"step","revert_type":"undo"},
	 {"key":"b","type":"step","deps":["a"]}]}`)
	h.forward("w", "a")
	h.fail(h.claimOne("w"), "fatal", false)
	h.wantRun("r", domain.RunReverting)
	if ph := h.task("r", "a").Comp.Phase; ph != CompReady {
		t.Fatalf("a compensation %s, want ready", ph)
	}
	h.verb(MsgInterrupt, "r")
	h.wantNoClaim("comp", "undo")
	if !h.verb(MsgRevert, "r") {
		t.Fatal("revert of an interrupted run: not changed")
	}
	h.wantRun("r", domain.RunReverting)
	if order := h.drainCompensations("r"); len(order) != 1 || !slices.Equal(order[0], []string{"a"}) {
		t.Fatalf("compensations after revert verb: %v (the ready compensation was lost)", order)
	}
	h.wantRun("r", domain.RunReverted)
}

func TestCancelRevokesAndCancelsWaitingTasks(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[
	 {"key":"a","type":"step"},
	 {"key":"c","type":"step","retry":{"max_attempts":3,"initial_backoff_ms":1000}},
	 {"key":"b","type":"step"},
	 {"key":"d","type":"step","deps":["a"]}]}`)
	got := h.claim("w", 2)
	if keys := claimKeys(got); !slices.Equal(keys, []string{"a", "c"}) {
		t.Fatalf("claimed %v", keys)
	}
	a, c := got[0], got[1]
	h.fail(c, "transient", true)
	h.wantTasks("r", map[string]domain.TaskState{"a": domain.TaskRunning, "b": domain.TaskReady,
		"c": domain.TaskRetrying, "d": domain.TaskPending})
	if !h.verb(MsgCancelRun, "r") {
		t.Fatal("cancel: not changed")
	}
	h.wantRun("r", domain.RunCancelled)
	h.wantTasks("r", map[string]domain.TaskState{"a": domain.TaskCancelled, "b": domain.TaskCancelled,
		"c": domain.TaskCancelled, "d": domain.TaskCancelled})
	if h.heartbeat(a) || h.complete(a, `"late"`) || h.fail(a, "late", true) {
		t.Fatal("a write with the cancelled lease was accepted")
	}
	at := h.task("r", "a")
	if at.LeaseOwner != "" || at.LeaseExpiresAt != 0 || at.Attempts[0].Outcome != OutcomeCancelled || at.Result != nil {
		t.Fatalf("a after cancel: %+v", at)
	}
	// The retry wake-up of c is gone: a tick long after changes nothing.
	h.now += 10_000
	h.ok(&Noop{}) // moves the FSM clock
	before := stateDigest(t, h.f)
	h.ok(&Tick{})
	h.ok(&Reap{})
	if stateDigest(t, h.f) != before {
		t.Fatal("tick/reap changed a cancelled run")
	}
	h.wantNoClaim("w")
	if h.verb(MsgCancelRun, "r") {
		t.Fatal("cancel of a cancelled run: changed")
	}
	h.submit("s", `{"tasks":[{"key":"x","type":"step"}]}`)
	h.forward("w", "x")
	if h.verb(MsgCancelRun, "s") {
		t.Fatal("cancel of a succeeded run: changed")
	}
	h.wantRun("s", domain.RunSucceeded)
}

func TestReplayWithAndWithoutReuse(t *testing.T) {
	h := newSem(t)
	h.submit("p", `{"tasks":[
	 {"key":"a","type":"step"},
	 {"key":"b","type":"step","deps":["a"]},
	 {"key":"c","type":"step","deps":["b"]}]}`)
	h.forward("w", "a")
	h.fail(h.claimOne("w"), "fatal", false)
	h.wantRun("p", domain.RunFailed)
	pa := h.task("p", "a")

	res := h.ok(&Replay{ParentID: "p", NewID: "fresh"}).(*SubmitResult)
	if !res.Created || res.State != domain.RunRunning {
		t.Fatalf("replay: %+v", res)
	}
	fr, fts := h.run("fresh")
	if fr.ParentID != "p" || fr.ReplayOf != "p" || fts["a"].State != domain.TaskReady || fts["a"].Result != nil {
		t.Fatalf("fresh replay: %+v a=%+v", fr, fts["a"])
	}
	h.forward("w", "a", "b", "c")
	h.wantRun("fresh", domain.RunSucceeded)

	res = h.ok(&Replay{ParentID: "p", NewID: "reuse", ReuseSucceeded: true}).(*SubmitResult)
	if !res.Created || res.State != domain.RunRunning {
		t.Fatalf("replay with reuse: %+v", res)
	}
	rr, rts := h.run("reuse")
	ra := rts["a"]
	if rr.ParentID != "p" || rr.ReplayOf != "p" || ra.State != domain.TaskSucceeded || !ra.Reused ||
		!bytes.Equal(ra.Result, pa.Result) || len(ra.Attempts) != 0 || rts["b"].State != domain.TaskReady {
		t.Fatalf("reuse replay: %+v a=%+v b=%+v", rr, ra, rts["b"])
	}
	if !hasTransition(runEvents(h, "reuse"), "task", "a", domain.EdgeReuseResult) {
		t.Fatal("no reuse_result event for a")
	}
	b := h.claimOne("w")
	if b.TaskKey != "b" || string(b.DepResults["a"]) != `"ra"` {
		t.Fatalf("b claim: %+v", b)
	}
	h.complete(b, `"rb"`)
	h.forward("w", "c")
	h.wantRun("reuse", domain.RunSucceeded)
	if n := len(h.task("reuse", "a").Attempts); n != 0 {
		t.Fatalf("reused task ran %d times", n)
	}
	// Idempotent by new id; unknown parent is an error.
	if again := h.ok(&Replay{ParentID: "p", NewID: "reuse"}).(*SubmitResult); again.Created {
		t.Fatal("second replay with the same id created a run")
	}
	wantErr(t, h.apply(&Replay{ParentID: "nope", NewID: "x"}), domain.ErrNotFound)
}
