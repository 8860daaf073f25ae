package fsm

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// Attempts that reflect work: a lease its worker never acknowledged (no
// heartbeat, complete or fail with its token) expires without spending an
// attempt, a bounded number of times; an acknowledged lease that expires is
// a spent attempt retried with the task's backoff, like a failure.

func (h *harness) reap() int {
	h.t.Helper()
	return h.ok(&Reap{}).(*CountResult).Count
}

func TestUnackedExpiryDoesNotSpendAnAttempt(t *testing.T) {
	h := newSem(t)
	h.ok(&SettingsSet{BreakerFailures: ptr(1)}) // one counted failure would open it
	h.submit("r", `{"tasks":[{"key":"x","type":"t","lease_ms":1000,"retry":{"max_attempts":1}}]}`)
	lost := h.claimOne("w1") // its reply was lost: w1 never heard of it
	if lost.Attempt != 1 {
		t.Fatalf("first claim is attempt %d", lost.Attempt)
	}
	h.now += 1000
	if n := h.reap(); n != 1 {
		t.Fatalf("reaped %d", n)
	}
	x := h.task("r", "x")
	if x.State != domain.TaskReady || x.Attempt != 0 || x.Unacked != 1 || x.StartedAt != 0 || x.RetryAt != 0 || !x.Indexed {
		t.Fatalf("after an unacknowledged expiry: %+v", x)
	}
	if a := x.Attempts; len(a) != 1 || a[0].Outcome != OutcomeLeaseUnacked || a[0].N != 1 || a[0].AckedAt != 0 ||
		a[0].Worker != "w1" || !strings.Contains(a[0].Error, "acknowledged") {
		t.Fatalf("attempts %+v", a)
	}
	if b := breakerOf(t, h.f, "t"); b.State != BreakerClosed || b.Failures != 0 {
		t.Fatalf("an unacknowledged expiry counted as a breaker failure: %+v", b)
	}
	if c, _ := h.f.Counters(); c.LeaseExpiries != 1 || c.LeaseUnacked != 1 {
		t.Fatalf("counters %+v", c)
	}
	evs := runEvents(h, "r")
	last := evs[len(evs)-1]
	if last.Transition != domain.EdgeReapLease || last.From != "running" || last.To != "ready" ||
		last.Attempt != 1 || last.Worker != "w1" || last.Error != OutcomeLeaseUnacked {
		t.Fatalf("reap event %+v", last)
	}

	// Ready at once (no backoff); the next claim is attempt 1 again, and
	// its completion (without any heartbeat) acknowledges it.
	again := h.claimOne("w2")
	if again.Attempt != 1 || again.FencingToken <= lost.FencingToken {
		t.Fatalf("reclaim %+v", again)
	}
	if h.complete(lost, `"late"`) {
		t.Fatal("the lost lease's token was accepted")
	}
	h.now += 5
	if !h.complete(again, `"ok"`) {
		t.Fatal("completion rejected")
	}
	h.wantRun("r", domain.RunSucceeded)
	x = h.task("r", "x")
	if x.Attempt != 1 || len(x.Attempts) != 2 || x.Attempts[1].Outcome != OutcomeSucceeded || x.Attempts[1].N != 1 ||
		x.Attempts[1].AckedAt != h.now || x.StartedAt == 0 {
		t.Fatalf("after success: %+v", x)
	}
}

func TestHeartbeatAcknowledgesAndExpiryThenCountsWithBackoff(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"x","type":"t","lease_ms":1000,"retry":{"max_attempts":3,"initial_backoff_ms":400}}]}`)
	c := h.claimOne("w1")
	h.now += 10
	if !h.heartbeat(c) {
		t.Fatal("heartbeat rejected")
	}
	acked := h.now
	h.now += 10
	h.heartbeat(c) // a second heartbeat keeps the first ack time
	if at := h.task("r", "x").Attempts[0].AckedAt; at != acked {
		t.Fatalf("acked_at %d, want %d", at, acked)
	}
	h.now += 1000
	h.reap()
	x := h.task("r", "x")
	want := h.now + domain.Backoff(x.Retry, x.ID(), 1)
	if x.State != domain.TaskRetrying || x.Attempt != 1 || x.RetryAt != want || x.Unacked != 0 ||
		x.Attempts[0].Outcome != OutcomeLeaseExpired || !strings.Contains(x.Error, "lease expired on attempt 1") {
		t.Fatalf("after an acknowledged expiry: %+v (retry at %d, want %d)", x, x.RetryAt, want)
	}
	evs := runEvents(h, "r")
	if n := len(evs); evs[n-2].Transition != domain.EdgeFail || evs[n-1].Transition != domain.EdgeScheduleRetry {
		t.Fatalf("events %+v", evs[n-2:])
	}
	if b := breakerOf(t, h.f, "t"); b.Failures != 1 {
		t.Fatalf("breaker %+v: a spent attempt is a breaker failure", b)
	}
	h.now = want - 1
	h.ok(&Tick{})
	h.wantNoClaim("w2") // still backing off
	h.now = want
	h.ok(&Tick{})
	if c2 := h.claimOne("w2"); c2.Attempt != 2 {
		t.Fatalf("retry is attempt %d", c2.Attempt)
	}
}

// A write with a token that is not the live lease acknowledges nothing.
func TestStaleWritesDoNotAcknowledge(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"x","type":"t","lease_ms":1000,"retry":{"max_attempts":1}}]}`)
	c := h.claimOne("w1")
	if h.ok(&Heartbeat{TaskID: c.TaskID, Token: c.FencingToken + 1}).(*AckResult).Accepted {
		t.Fatal("wrong token accepted")
	}
	h.now += 1000
	h.reap()
	if x := h.task("r", "x"); x.State != domain.TaskReady || x.Attempts[0].Outcome != OutcomeLeaseUnacked {
		t.Fatalf("%+v", x)
	}
}

// A re-sent claim (same request id) answers the same lease; it is the
// worker's heartbeat, not the re-send, that acknowledges it.
func TestResentClaimDoesNotAcknowledge(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"x","type":"t","lease_ms":1000,"retry":{"max_attempts":1}}]}`)
	claim := &Claim{Waiters: []Waiter{{WorkerID: "w", Max: 1, RequestID: "q1"}}}
	first := h.ok(claim).(*ClaimResult).Assigned[0]
	again := h.ok(claim).(*ClaimResult).Assigned[0]
	if len(first) != 1 || len(again) != 1 || again[0].FencingToken != first[0].FencingToken {
		t.Fatalf("re-sent claim %+v, first %+v", again, first)
	}
	h.now += 1000
	h.reap()
	if x := h.task("r", "x"); x.State != domain.TaskReady || x.Attempt != 0 {
		t.Fatalf("%+v", x)
	}
	// The request's lease is gone: the wc/ index holds nothing for it.
	if n := len(h.ok(claim).(*ClaimResult).Assigned[0]); n != 1 {
		t.Fatalf("a re-send after the expiry leased %d", n)
	}
}

// A task no worker ever acknowledges still ends: after MaxUnackedExpiries
// free expiries, the next ones count like any expiry.
func TestUnackedExpiriesAreBounded(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"x","type":"t","lease_ms":100,"retry":{"max_attempts":2,"initial_backoff_ms":50}}]}`)
	var outcomes []string
	for i := 0; i < 10 && h.taskState("r", "x") != domain.TaskFailed; i++ {
		h.now += 50
		h.ok(&Tick{})
		c := h.claimOne("w")
		wantN := 1
		if i > domain.MaxUnackedExpiries {
			wantN = 2
		}
		if c.Attempt != wantN {
			t.Fatalf("claim %d is attempt %d, want %d", i, c.Attempt, wantN)
		}
		h.now += 100
		h.reap()
		x := h.task("r", "x")
		outcomes = append(outcomes, x.Attempts[len(x.Attempts)-1].Outcome)
	}
	want := []string{OutcomeLeaseUnacked, OutcomeLeaseUnacked, OutcomeLeaseUnacked, OutcomeLeaseExpired, OutcomeLeaseExpired}
	if strings.Join(outcomes, ",") != strings.Join(want, ",") {
		t.Fatalf("outcomes %v, want %v", outcomes, want)
	}
	x := h.task("r", "x")
	if x.State != domain.TaskFailed || x.Unacked != domain.MaxUnackedExpiries || x.Attempt != 2 ||
		!strings.Contains(x.Error, "never acknowledged") {
		t.Fatalf("%+v", x)
	}
	h.wantRun("r", domain.RunFailed)
}

// A straggler of a failed run whose lease expires unacknowledged fails as
// before: its run does not want it back.
func TestUnackedExpiryOfAFailedRunsStraggler(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t","lease_ms":1000,"retry":{"max_attempts":1}},{"key":"b","type":"t","lease_ms":1000}]}`)
	cs := h.claim("w", 2)
	h.fail(cs[0], "boom", false)
	h.wantRun("r", domain.RunFailed)
	h.now += 1000
	h.reap()
	if x := h.task("r", cs[1].TaskKey); x.State != domain.TaskFailed || x.Attempts[0].Outcome != OutcomeLeaseExpired {
		t.Fatalf("%+v", x)
	}
}

func TestUnackedCompensationExpiryDoesNotSpendAnAttempt(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"on_failure":"revert","tasks":[
	 {"key":"a","type":"t","revert_type":"undo","lease_ms":1000,"retry":{"max_attempts":1}},
	 {"key":"b","type":"t","deps":["a"],"retry":{"max_attempts":1}}]}`)
	h.complete(h.claimOne("w"), `"ra"`)
	h.fail(h.claimOne("w"), "boom", false)
	h.wantRun("r", domain.RunReverting)
	lost := h.claimOne("comp")
	if !lost.Compensation || lost.Attempt != 1 {
		t.Fatalf("compensation claim %+v", lost)
	}
	h.now += 1000
	h.reap()
	a := h.task("r", "a")
	if a.State != domain.TaskReverting || a.Comp.Phase != CompReady || a.Comp.Attempt != 0 || a.Comp.Unacked != 1 ||
		a.Attempts[len(a.Attempts)-1].Outcome != OutcomeLeaseUnacked {
		t.Fatalf("after an unacknowledged compensation expiry: %+v comp %+v", a, a.Comp)
	}
	if !hasTransition(runEvents(h, "r"), "compensation", "a", domain.EdgeReapLease) {
		t.Fatal("no compensation reap_lease event")
	}
	again := h.claimOne("comp")
	if again.Attempt != 1 || !again.Compensation {
		t.Fatalf("compensation reclaim %+v", again)
	}
	h.complete(again, "")
	h.wantRun("r", domain.RunReverted)
}

// The default retry policy: one attempt (the protocol's default) unless
// the cluster's default_max_attempts says otherwise; set to 10, a task that
// sets none gets 10 attempts with exponential backoff from 1 s, doubling,
// capped at 60 s. A run keeps the policy it was submitted with.
func TestDefaultRetryPolicyRetriesWithBackoff(t *testing.T) {
	h := newSem(t)
	h.submit("one", `{"tasks":[{"key":"x","type":"other"}]}`)
	if p := h.task("one", "x").Retry; p.MaxAttempts != 1 {
		t.Fatalf("default max_attempts %d, want 1 (PROTOCOL.md)", p.MaxAttempts)
	}
	h.ok(&SettingsSet{BreakerFailures: ptr(-1), DefaultMaxAttempts: ptr(domain.RecommendedMaxAttempts)}) // ten failures in a row would open a breaker
	if err, _ := h.apply(&SettingsSet{DefaultMaxAttempts: ptr(1000)}).(error); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("default_max_attempts 1000: %v, want invalid", err)
	}
	h.submit("r", `{"tasks":[{"key":"x","type":"t"}]}`)
	if p := h.task("one", "x").Retry; p.MaxAttempts != 1 {
		t.Fatalf("an existing run's policy changed to %d attempts", p.MaxAttempts)
	}
	x := h.task("r", "x")
	if x.Retry != (domain.RetryPolicy{MaxAttempts: 10, InitialBackoffMS: 1000, MaxBackoffMS: 60_000, Multiplier: 2}) {
		t.Fatalf("default policy %+v", x.Retry)
	}
	for n := 1; n <= 10; n++ {
		c := h.claim("w", 1, "t")[0]
		if c.Attempt != n {
			t.Fatalf("claim is attempt %d, want %d", c.Attempt, n)
		}
		h.fail(c, "boom", true)
		x = h.task("r", "x")
		if n == 10 {
			break
		}
		d := x.RetryAt - h.now
		base := min(int64(1000)<<(n-1), 60_000)
		if x.State != domain.TaskRetrying || d < base/2 || d > base {
			t.Fatalf("after attempt %d: %s, retry in %d ms (want [%d, %d])", n, x.State, d, base/2, base)
		}
		h.now = x.RetryAt
		h.ok(&Tick{})
	}
	if x.State != domain.TaskFailed {
		t.Fatalf("after 10 failed attempts: %s", x.State)
	}
	h.wantRun("r", domain.RunFailed)
}

// A new leader's first command (NewTerm) gives every unacknowledged lease a
// fresh lease period from the term's start: its claim's answer may have
// been lost with the old leader, and the worker's re-sent claim needs an
// election and its client's patience to arrive. An acknowledged lease, and
// one whose period is already longer, is left as it is; the re-sent claim
// then still finds the lease, and the reaper expires it only a full period
// after the term began.
func TestNewTermRenewsUnacknowledgedLeases(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"lost","type":"t","lease_ms":1500},{"key":"held","type":"t","lease_ms":1500},{"key":"fresh","type":"t","lease_ms":1500}]}`)
	lost := h.claimOne("w1")
	held := h.claimOne("w2")
	h.now += 900
	if !h.heartbeat(held) {
		t.Fatal("heartbeat refused")
	}
	fresh := h.claimOne("w3")
	heldUntil := h.task("r", held.TaskKey).LeaseExpiresAt
	freshUntil := h.task("r", fresh.TaskKey).LeaseExpiresAt
	h.now += 300 // the election: a new leader's term starts
	term := h.now
	if res := h.ok(&NewTerm{Leader: "n2"}).(*CountResult); res.Count != 2 || res.More {
		t.Fatalf("renewed %+v, want the 2 unacknowledged leases", res)
	}
	if got := h.task("r", lost.TaskKey).LeaseExpiresAt; got != term+1500 {
		t.Fatalf("unacknowledged lease ends at %d, want %d (a full period from the term)", got, term+1500)
	}
	if got := h.task("r", fresh.TaskKey).LeaseExpiresAt; got != term+1500 || got <= freshUntil {
		t.Fatalf("fresh unacknowledged lease ends at %d, want %d", got, term+1500)
	}
	if got := h.task("r", held.TaskKey).LeaseExpiresAt; got != heldUntil {
		t.Fatalf("acknowledged lease moved to %d from %d", got, heldUntil)
	}
	// Past the old expiry the reaper leaves it; a full period after the
	// term it expires (without spending an attempt).
	h.now = lost.LeaseExpiresAt + 1
	if !h.heartbeat(held) { // held's worker keeps it past the next reap
		t.Fatal("heartbeat refused")
	}
	h.reap()
	if x := h.task("r", lost.TaskKey); x.State != domain.TaskRunning || x.FencingToken != lost.FencingToken {
		t.Fatalf("reaped before its renewed end: %+v", x)
	}
	h.now = term + 1500
	h.reap()
	if x := h.task("r", lost.TaskKey); x.State != domain.TaskReady || x.Attempt != 0 {
		t.Fatalf("after the renewed end: state %s attempt %d, want ready without a spent attempt", x.State, x.Attempt)
	}
	// With nothing unacknowledged, a term renews nothing.
	if res := h.ok(&NewTerm{}).(*CountResult); res.Count != 0 {
		t.Fatalf("a second term renewed %d", res.Count)
	}
}

// A term with many unacknowledged leases of large tasks (a running task's
// record holds its input) renews them over several NewTerm commands, each
// within the entry write limit, instead of one entry too large to apply.
func TestNewTermSplitsLargeRenewals(t *testing.T) {
	h := newSem(t)
	big := `"` + strings.Repeat("x", 900<<10) + `"`
	const n = 12
	for i := range n {
		h.submit(fmt.Sprint("r", i), `{"tasks":[{"key":"x","type":"t","lease_ms":1500,"input":`+big+`}]}`)
	}
	for range n {
		h.claimOne("w")
	}
	h.now += 500
	renewed, commands := 0, 0
	for {
		res := h.apply(&NewTerm{})
		cr, ok := res.(*CountResult)
		if !ok {
			t.Fatalf("NewTerm answered %v", res)
		}
		renewed += cr.Count
		commands++
		if !cr.More {
			break
		}
		if cr.Count == 0 || commands > n {
			t.Fatalf("no progress: %+v after %d commands", cr, commands)
		}
	}
	if renewed != n || commands < 2 {
		t.Fatalf("renewed %d leases in %d commands, want %d in several", renewed, commands, n)
	}
	for i := range n {
		if x := h.task(fmt.Sprint("r", i), "x"); x.LeaseExpiresAt != h.now+1500 {
			t.Fatalf("r%d lease ends at %d, want %d", i, x.LeaseExpiresAt, h.now+1500)
		}
	}
}
