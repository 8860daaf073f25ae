package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"pgregory.net/rapid"
)

// A model-based test: random command sequences run against the FSM and a
// small in-memory model; after every command the two must agree and the
// FSM's invariants must hold. The model predicts only what it can predict
// exactly; which task a claim picks is read from the claim result.

// rapidTB lets the harness report through rapid (for shrinking) while the
// enclosing test supplies the rest of testing.TB.
type rapidTB struct {
	testing.TB
	rt *rapid.T
}

func (r rapidTB) Helper()                           {}
func (r rapidTB) Fatal(args ...any)                 { r.rt.Fatal(args...) }
func (r rapidTB) Fatalf(format string, args ...any) { r.rt.Fatalf(format, args...) }
func (r rapidTB) Error(args ...any)                 { r.rt.Error(args...) }
func (r rapidTB) Errorf(format string, args ...any) { r.rt.Errorf(format, args...) }
func (r rapidTB) Log(args ...any)                   { r.rt.Log(args...) }
func (r rapidTB) Logf(format string, args ...any)   { r.rt.Logf(format, args...) }
func (r rapidTB) Failed() bool                      { return r.rt.Failed() }

type mAttempt struct {
	token   uint64
	outcome string
	comp    bool
	acked   bool // the worker acknowledged the claim (heartbeat, complete, fail)
}

type mTask struct {
	run                  *mRun
	key, typ, revertType string
	deps, dependents     []string
	retry                domain.RetryPolicy
	leaseMS              int64
	state                domain.TaskState
	attempt, compAttempt int
	unacked, compUnacked int    // expiries of unacknowledged leases not counted
	token                uint64 // last claim's token
	leased               bool
	leaseExp, retryAt    int64
	comp                 string // compensation phase; "" = none
	result               json.RawMessage
	attempts             []mAttempt
	when, trigger        string // the task's condition and trigger rule (model_decide_test.go)
	base                 int    // attempts before the last run.retry (model_retry_test.go)
	finally              bool   // a finally task (model_finally_test.go)
	mTimes                      // timeouts and waits (model_time_test.go)
	mChildTask                  // a run task (model_child_test.go)
}

func (t *mTask) id() string { return t.run.id + "/" + t.key }

type mRun struct {
	id     string
	def    string // the definition it was submitted by, and its version
	defV   int
	revert bool // on_failure revert
	// decided: the spec uses trigger rules or conditions (V2).
	decided   bool
	mFinally  // finally tasks (model_finally_test.go)
	mChildRun // a child run's link to its parent (model_child_test.go)
	state     domain.RunState
	from      domain.RunState // state an interrupted run resumes into
	tasks     []*mTask
	byKey     map[string]*mTask
}

type model struct {
	h       *harness
	runs    []*mRun
	evNext  uint64
	mStored // schedules and definitions (model_schedule_test.go)
	mFlow   // rate limits and auto concurrency (model_flow_test.go)
	mChildren
}

func (m *model) now() int64 { return m.h.now }

func (m *model) find(id string) *mTask {
	run, key, _ := splitTaskID(id)
	for _, r := range m.runs {
		if r.id == run {
			return r.byKey[key]
		}
	}
	return nil
}

func (m *model) all() []*mTask {
	var out []*mTask
	for _, r := range m.runs {
		out = append(out, r.tasks...)
	}
	return out
}

// dispatchType is the type a dispatchable task is claimed as (a
// compensation's is its revert_type).
func (m *model) dispatchType(t *mTask) string {
	if t.state == domain.TaskReverting {
		return t.revertType
	}
	return t.typ
}

func (m *model) dispatchable(t *mTask) bool {
	return (t.state == domain.TaskReady && (t.run.state == domain.RunRunning || t.run.state == domain.RunReverting && t.run.finStarted) && !t.wait && t.def == "") ||
		(t.state == domain.TaskReverting && t.comp == CompReady && t.run.state == domain.RunReverting)
}

// ack: a write with the live token acknowledges the claim.
func (m *model) ack(t *mTask) {
	if n := len(t.attempts); n > 0 && t.attempts[n-1].outcome == OutcomeRunning {
		t.attempts[n-1].acked = true
	}
}

func (m *model) acked(t *mTask) bool {
	n := len(t.attempts)
	return n > 0 && t.attempts[n-1].outcome == OutcomeRunning && t.attempts[n-1].acked
}

func (m *model) endLease(t *mTask, outcome string) {
	t.leased, t.leaseExp, t.timeoutAt = false, 0, 0
	if n := len(t.attempts); n > 0 && t.attempts[n-1].outcome == OutcomeRunning {
		t.attempts[n-1].outcome = outcome
	}
}

// promote makes every pending task whose dependencies all succeeded ready:
// in a running or interrupted run no such task stays pending.
func (m *model) promote(r *mRun) {
	if r.decided || r.hasFinally() {
		m.decide(r) // skips held finally tasks; finally tasks are always decided
		if r.decided {
			return
		}
	}
	for _, t := range r.tasks {
		ok := t.state == domain.TaskPending && !t.finally
		for _, d := range t.deps {
			ok = ok && r.byKey[d].state == domain.TaskSucceeded
		}
		if ok {
			t.state = domain.TaskReady
			m.armReady(t)
		}
	}
}

func (m *model) cancelWaiting(t *mTask) bool {
	switch t.state {
	case domain.TaskPending, domain.TaskReady, domain.TaskRetrying:
		t.state, t.retryAt = domain.TaskCancelled, 0
		return true
	}
	return false
}

// derive: forward runs fail on any failed task (or start reverting) and
// succeed when every task did; reverting runs end when no task reverts.
func (m *model) derive(r *mRun) {
	was := r.state
	m.deriveRun(r)
	if r.state != was && r.state.Done() {
		m.runEnded(r) // model_child_test.go
	}
}

func (m *model) deriveRun(r *mRun) {
	count := map[domain.TaskState]int{}
	for _, t := range r.tasks {
		count[t.state]++
	}
	if r.hasFinally() && m.deriveFinally(r) {
		return
	}
	switch r.state {
	case domain.RunRunning:
		if r.decided {
			m.deriveDecided(r, count)
			return
		}
		switch {
		case count[domain.TaskFailed] > 0 && r.revert:
			m.startRevert(r)
		case count[domain.TaskFailed] > 0:
			r.state = domain.RunFailed
			for _, t := range r.tasks {
				m.cancelWaiting(t)
			}
		case count[domain.TaskSucceeded]+count[domain.TaskSkipped] == len(r.tasks):
			r.state = domain.RunSucceeded
		}
	case domain.RunReverting:
		switch {
		case count[domain.TaskReverting] > 0:
		case count[domain.TaskFailed] > 0:
			r.state = domain.RunFailed
		default:
			r.state = domain.RunReverted
		}
	}
}

func (m *model) startRevert(r *mRun) {
	r.state, r.from = domain.RunReverting, ""
	for _, t := range r.tasks {
		if t.finally {
			continue // held: it runs after the revert
		}
		if m.cancelWaiting(t) {
			continue
		}
		switch t.state {
		case domain.TaskRunning:
			m.endLease(t, OutcomeRevoked)
			fallthrough
		case domain.TaskSucceeded, domain.TaskFailed:
			t.state, t.comp, t.compAttempt, t.compUnacked = domain.TaskReverting, CompWaiting, 0, 0
		}
	}
	m.propagate(r, MsgCancelRun) // nothing waits for its running child runs
	m.advanceRevert(r)
	m.derive(r)
}

// advanceRevert: a waiting compensation starts once no dependent of its
// task is still reverting; tasks without revert_type are reverted at once.
func (m *model) advanceRevert(r *mRun) {
	if r.state != domain.RunReverting {
		return
	}
	for changed := true; changed; {
		changed = false
		for _, t := range r.tasks {
			if t.state != domain.TaskReverting || t.comp != CompWaiting {
				continue
			}
			blocked := false
			for _, d := range t.dependents {
				blocked = blocked || r.byKey[d].state == domain.TaskReverting
			}
			if blocked {
				continue
			}
			changed = true
			if t.revertType == "" {
				t.state, t.comp = domain.TaskReverted, ""
			} else {
				t.comp = CompReady
			}
		}
	}
}

// failAttempt: a forward attempt retries while attempts remain and the run
// still wants it; a compensation retries by the same policy.
func (m *model) failAttempt(t *mTask, retryable bool) {
	r := t.run
	if t.state == domain.TaskReverting {
		if retryable && t.compAttempt < t.retry.MaxAttempts {
			t.comp, t.retryAt = CompRetrying, m.now()+domain.Backoff(t.retry, t.id()+"#revert", t.compAttempt)
		} else {
			t.comp, t.state = "failed", domain.TaskFailed
			m.advanceRevert(r)
		}
	} else {
		t.state = domain.TaskFailed
		if retryable && m.canRetry(t) {
			t.state, t.retryAt = domain.TaskRetrying, m.now()+domain.Backoff(t.retry, t.id(), t.attempt)
		} else if (r.decided || t.finally) && m.executing(r) {
			m.promote(r) // its dependents are decided
		}
	}
	m.derive(r)
}

func (m *model) canRetry(t *mTask) bool {
	return t.attempt-t.base < t.retry.MaxAttempts && m.executing(t.run)
}

// ---- actions ----

func (m *model) submit(rt *rapid.T) {
	if countRuns(m.runs, func(r *mRun) bool { return r.parent == nil }) >= 3 {
		rt.Skip("enough runs")
	}
	spec := drawSpecWith(rt, 5, m.childRefs)
	id := fmt.Sprintf("run%d", len(m.runs))
	res := m.h.ok(&Submit{ID: id, Spec: spec}).(*SubmitResult)
	if r := m.addRun(id, spec); !res.Created || res.State != r.state {
		rt.Fatalf("submit: %+v, model says %s", res, r.state)
	}
}

func countRuns(runs []*mRun, pred func(*mRun) bool) int {
	n := 0
	for _, r := range runs {
		if pred(r) {
			n++
		}
	}
	return n
}

// drawSpec draws a workflow of 1 to maxTasks tasks.
func drawSpec(rt *rapid.T, maxTasks int) domain.Spec { return drawSpecWith(rt, maxTasks, nil) }

// drawSpecWith draws a workflow whose run tasks (if any) name one of refs.
func drawSpecWith(rt *rapid.T, maxTasks int, refs []string) domain.Spec {
	n := rapid.IntRange(1, maxTasks).Draw(rt, "tasks")
	spec := domain.Spec{OnFailure: rapid.SampledFrom([]string{"fail", "revert"}).Draw(rt, "on_failure")}
	for i := 0; i < n; i++ {
		ts := domain.TaskSpec{
			Key: fmt.Sprintf("k%d", i), Type: rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "type"),
			RevertType: rapid.SampledFrom([]string{"", "undo"}).Draw(rt, "revert_type"),
			LeaseMS:    rapid.SampledFrom([]int64{100, 1000, 5000}).Draw(rt, "lease_ms"),
			Retry: &domain.RetryPolicy{MaxAttempts: rapid.IntRange(1, 3).Draw(rt, "max_attempts"),
				InitialBackoffMS: rapid.Int64Range(10, 500).Draw(rt, "backoff")},
		}
		drawTimes(rt, &ts)
		drawChild(rt, &ts, refs)
		for j := 0; j < i; j++ {
			if rapid.Bool().Draw(rt, "dep") {
				ts.Deps = append(ts.Deps, fmt.Sprintf("k%d", j))
			}
		}
		drawDecision(rt, &ts)
		spec.Tasks = append(spec.Tasks, ts)
	}
	drawFinally(rt, &spec)
	return spec
}

// addRun adds the run id of spec that the last entry created (running).
func (m *model) addRun(id string, spec domain.Spec) *mRun { return m.addRunOf(id, spec, nil) }

// addRunOf adds a run, the child run of the run task parent if not nil.
func (m *model) addRunOf(id string, spec domain.Spec, parent *mTask) *mRun {
	r := &mRun{id: id, revert: spec.OnFailure == "revert", state: domain.RunRunning, byKey: map[string]*mTask{},
		decided: spec.UsesDecisions()}
	if parent != nil {
		r.parent, r.depth, parent.child = parent, parent.run.depth+1, r
	}
	norm := spec.Normalize()
	for i, ts := range append(norm.Tasks, norm.Finally...) {
		t := &mTask{run: r, finally: i >= len(norm.Tasks), key: ts.Key, typ: ts.Type, revertType: ts.RevertType, deps: ts.Deps, when: ts.When, trigger: ts.Trigger,
			retry: *ts.Retry, leaseMS: ts.LeaseMS, state: domain.TaskPending,
			mTimes: mTimes{timeoutMS: ts.TimeoutMS, wait: ts.IsWait()}}
		if ts.IsRunTask() {
			t.def, t.inline = ts.Definition, ts.Spec
			if ts.Spec != nil {
				t.def = inlineChild
			}
		}
		r.tasks = append(r.tasks, t)
		r.byKey[t.key] = t
		for _, d := range ts.Deps {
			r.byKey[d].dependents = append(r.byKey[d].dependents, t.key)
		}
	}
	m.runs = append(m.runs, r)
	m.promote(r)
	if r.decided {
		m.derive(r) // every task may be decided at once
	}
	return r
}

func (m *model) run(id string) *mRun {
	for _, r := range m.runs {
		if r.id == id {
			return r
		}
	}
	return nil
}

func (m *model) claim(rt *rapid.T) {
	ws := make([]Waiter, rapid.IntRange(1, 3).Draw(rt, "waiters"))
	want := 0
	for i := range ws {
		// A fresh request id per claim: its leases enter the derived
		// claim-request index, which the rebuild check covers.
		ws[i] = Waiter{WorkerID: fmt.Sprintf("w%d", i), Max: rapid.IntRange(0, 3).Draw(rt, "max"),
			RequestID: fmt.Sprintf("req-%d-%d", m.h.index, i)}
		want += max(ws[i].Max, 1)
	}
	avail, byType := 0, map[string]int{}
	for _, t := range m.all() {
		if m.dispatchable(t) {
			avail++
			byType[m.dispatchType(t)]++
		}
	}
	want = min(want, avail, m.flowBudget(byType, m.leasedCount()))
	res := m.h.ok(&Claim{Waiters: ws}).(*ClaimResult)
	tok, got := m.h.index, 0
	for i, as := range res.Assigned {
		if len(as) > max(ws[i].Max, 1) {
			rt.Fatalf("waiter %d (max %d) got %d tasks", i, ws[i].Max, len(as))
		}
		for _, c := range as {
			t := m.find(c.TaskID)
			if t == nil || !m.dispatchable(t) {
				rt.Fatalf("claimed %s, which is not dispatchable: %+v", c.TaskID, t)
			}
			if c.FencingToken != tok || tok <= t.token {
				rt.Fatalf("claim of %s: token %d (entry %d, previous %d) must be the entry index and increase", c.TaskID, c.FencingToken, tok, t.token)
			}
			deps := map[string]json.RawMessage{}
			for _, d := range t.deps {
				if res := t.run.byKey[d].result; res != nil {
					deps[d] = res
				}
			}
			if !maps.EqualFunc(deps, c.DepResults, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
				rt.Fatalf("claim of %s: dep results %v, want %v", c.TaskID, c.DepResults, deps)
			}
			m.flowTake(m.dispatchType(t))
			comp := t.state == domain.TaskReverting
			if comp {
				t.comp = CompRunning
				t.compAttempt++
				if c.Attempt != t.compAttempt || c.Type != t.revertType || !bytes.Equal(c.Result, t.result) || !c.Compensation {
					rt.Fatalf("compensation claim %+v of %+v", c, t)
				}
			} else {
				t.state = domain.TaskRunning
				t.attempt++
				if c.Attempt != t.attempt || c.Type != t.typ || c.Result != nil || c.Compensation {
					rt.Fatalf("claim %+v of %+v", c, t)
				}
			}
			t.token, t.leased, t.leaseExp = tok, true, m.now()+t.leaseMS
			m.armTimeout(t, comp)
			t.attempts = append(t.attempts, mAttempt{token: tok, outcome: OutcomeRunning, comp: comp})
			if c.LeaseExpiresAt != t.leaseExp {
				rt.Fatalf("claim of %s: lease expires at %d, want %d", c.TaskID, c.LeaseExpiresAt, t.leaseExp)
			}
			got++
		}
	}
	if got != want {
		rt.Fatalf("claim assigned %d tasks, want %d (%d dispatchable)", got, want, avail)
	}
}

func (m *model) pickLeased(rt *rapid.T) *mTask {
	var leased []*mTask
	for _, t := range m.all() {
		if t.leased {
			leased = append(leased, t)
		}
	}
	if len(leased) == 0 {
		rt.Skip("nothing leased")
	}
	return rapid.SampledFrom(leased).Draw(rt, "task")
}

func (m *model) complete(rt *rapid.T) {
	t := m.pickLeased(rt)
	result := json.RawMessage(fmt.Sprintf(`"%s@%d"`, t.key, t.token))
	if m.late(rt, t, &Complete{TaskID: t.id(), Token: t.token, Result: result}) {
		return
	}
	if !m.h.ok(&Complete{TaskID: t.id(), Token: t.token, Result: result}).(*AckResult).Accepted {
		rt.Fatalf("completion of %s with its live token rejected", t.id())
	}
	m.ack(t)
	m.endLease(t, OutcomeSucceeded)
	if t.state == domain.TaskReverting {
		t.state, t.comp, t.compAttempt, t.compUnacked = domain.TaskReverted, "", 0, 0
		m.advanceRevert(t.run)
	} else {
		t.state, t.result = domain.TaskSucceeded, result
		if m.executing(t.run) {
			m.promote(t.run)
		}
	}
	m.derive(t.run)
}

func (m *model) fail(rt *rapid.T) {
	t := m.pickLeased(rt)
	retryable := rapid.Bool().Draw(rt, "retryable")
	if m.late(rt, t, &Fail{TaskID: t.id(), Token: t.token, Error: "boom", Retryable: &retryable}) {
		return
	}
	if !m.h.ok(&Fail{TaskID: t.id(), Token: t.token, Error: "boom", Retryable: &retryable}).(*AckResult).Accepted {
		rt.Fatalf("failure of %s with its live token rejected", t.id())
	}
	m.ack(t)
	m.endLease(t, OutcomeFailed)
	m.failAttempt(t, retryable)
}

func (m *model) heartbeat(rt *rapid.T) {
	t := m.pickLeased(rt)
	if m.late(rt, t, &Heartbeat{TaskID: t.id(), Token: t.token}) {
		return
	}
	ack := m.h.ok(&Heartbeat{TaskID: t.id(), Token: t.token}).(*AckResult)
	t.leaseExp = m.leaseEnd(t)
	m.ack(t)
	if !ack.Accepted || ack.LeaseExpiresAt != t.leaseExp {
		rt.Fatalf("heartbeat of %s: %+v, want expiry %d", t.id(), ack, t.leaseExp)
	}
}

// stale sends complete, fail or heartbeat with a token that is not the
// task's live lease: nothing changes, and only a retry of the last,
// already recorded outcome is acknowledged.
func (m *model) stale(rt *rapid.T) {
	var cands []*mTask
	for _, t := range m.all() {
		if len(t.attempts) > 0 {
			cands = append(cands, t)
		}
	}
	if len(cands) == 0 {
		rt.Skip("nothing ever claimed")
	}
	t := rapid.SampledFrom(cands).Draw(rt, "task")
	tokens := []uint64{0}
	for _, a := range t.attempts {
		if !t.leased || a.token != t.token {
			tokens = append(tokens, a.token)
		}
	}
	tok := rapid.SampledFrom(tokens).Draw(rt, "token")
	last := t.attempts[len(t.attempts)-1]
	before := m.digestNoClock()
	var ack *AckResult
	want := false
	switch op := rapid.IntRange(0, 2).Draw(rt, "op"); op {
	case 0:
		ack = m.h.ok(&Complete{TaskID: t.id(), Token: tok, Result: json.RawMessage(`"stale"`)}).(*AckResult)
		want = last.token == tok && last.outcome == OutcomeSucceeded
	case 1:
		ack = m.h.ok(&Fail{TaskID: t.id(), Token: tok, Error: "stale"}).(*AckResult)
		want = last.token == tok && last.outcome == OutcomeFailed
	default:
		ack = m.h.ok(&Heartbeat{TaskID: t.id(), Token: tok}).(*AckResult)
	}
	if ack.Accepted != want {
		rt.Fatalf("stale write to %s with token %d: accepted %v, want %v", t.id(), tok, ack.Accepted, want)
	}
	if m.digestNoClock() != before {
		rt.Fatalf("stale write to %s with token %d changed state", t.id(), tok)
	}
}

func (m *model) reap(rt *rapid.T) {
	m.h.now += rapid.Int64Range(0, 6000).Draw(rt, "advance")
	var due []*mTask
	for _, t := range m.all() {
		if t.leased && t.leaseExp <= m.now() {
			due = append(due, t)
		}
	}
	slices.SortFunc(due, func(a, b *mTask) int {
		if a.leaseExp != b.leaseExp {
			return int(a.leaseExp - b.leaseExp)
		}
		return bytes.Compare([]byte(a.id()), []byte(b.id()))
	})
	if n := m.h.ok(&Reap{}).(*CountResult).Count; n != len(due) {
		rt.Fatalf("reap counted %d due leases, want %d", n, len(due))
	}
	for _, t := range due {
		if !t.leased { // revoked by a revert earlier in this entry
			continue
		}
		// Never acknowledged: not counted, ready again at once (bounded).
		if !m.acked(t) {
			if t.state == domain.TaskReverting && t.compUnacked < domain.MaxUnackedExpiries {
				m.endLease(t, OutcomeLeaseUnacked)
				t.compUnacked++
				t.compAttempt--
				t.comp = CompReady
				continue
			}
			if t.state == domain.TaskRunning && t.unacked < domain.MaxUnackedExpiries && m.executing(t.run) {
				m.endLease(t, OutcomeLeaseUnacked)
				t.unacked++
				t.attempt--
				t.state = domain.TaskReady
				continue
			}
		}
		// Otherwise an attempt spent, retried with backoff like a failure.
		m.endLease(t, m.expiryOutcome(t))
		m.failAttempt(t, true)
	}
}

func (m *model) tick(rt *rapid.T) {
	m.h.now += rapid.Int64Range(0, 1500).Draw(rt, "advance")
	var due []*mTask
	for _, t := range m.all() {
		if t.retryAt != 0 && t.retryAt <= m.now() {
			due = append(due, t)
		}
	}
	// In the wake index's order: a child run started (and ended) by one
	// wake may cancel a task due after it.
	slices.SortFunc(due, func(a, b *mTask) int {
		if a.retryAt != b.retryAt {
			return int(a.retryAt - b.retryAt)
		}
		return strings.Compare(a.id(), b.id())
	})
	n := m.h.ok(&Tick{}).(*CountResult).Count
	want := 0
	for _, t := range due {
		if t.retryAt == 0 {
			continue // cancelled by a wake before it
		}
		want++
		t.retryAt = 0
		if t.state == domain.TaskRetrying {
			t.state = domain.TaskReady
			m.armReady(t)
		} else {
			t.comp = CompReady
		}
	}
	if n != want {
		rt.Fatalf("tick woke %d, want %d", n, want)
	}
}

// cancelRun cancels a running, reverting or interrupted run.
func (m *model) cancelRun(r *mRun) {
	for _, t := range r.tasks {
		if m.cancelWaiting(t) {
			continue
		}
		switch t.state {
		case domain.TaskRunning:
			m.endLease(t, OutcomeCancelled)
			t.state = domain.TaskCancelled
		case domain.TaskReverting:
			if t.leased {
				m.endLease(t, OutcomeCancelled)
			}
			t.state, t.comp, t.retryAt = domain.TaskCancelled, "cancelled", 0
		}
	}
	r.state = domain.RunCancelled
	m.propagate(r, MsgCancelRun) // model_child_test.go
	m.childDone(r)
}

func (m *model) verb(rt *rapid.T) {
	if len(m.runs) == 0 {
		rt.Skip("no runs")
	}
	r := rapid.SampledFrom(m.runs).Draw(rt, "run")
	msg := rapid.SampledFrom([]MsgType{MsgCancelRun, MsgInterrupt, MsgResume, MsgRevert}).Draw(rt, "verb")
	changed := m.h.ok(NewRunVerb(msg, r.id)).(*ChangedResult).Changed
	want, s := true, r.state
	switch {
	case msg == MsgCancelRun && (s == domain.RunRunning || s == domain.RunReverting || s == domain.RunInterrupted):
		m.cancelRun(r)
	case msg == MsgInterrupt && (s == domain.RunRunning || s == domain.RunReverting):
		m.interrupt(r) // model_child_test.go
	case msg == MsgResume && s == domain.RunInterrupted:
		m.resume(r)
	case msg == MsgRevert && (s == domain.RunRunning || s == domain.RunInterrupted || s == domain.RunFailed) && !r.finStarted:
		m.startRevert(r)
	default:
		want = false
	}
	if changed != want {
		rt.Fatalf("%s of %s run %s: changed %v, want %v", msg, s, r.id, changed, want)
	}
}
