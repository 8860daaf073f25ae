package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

func TestDiamondRunsInDependencyOrder(t *testing.T) {
	h := newHarness(t)
	res := h.submit("run1", diamond)
	if !res.Created || res.State != domain.RunRunning {
		t.Fatalf("submit: %+v", res)
	}
	if got := h.claim("w1", 10); len(got) != 1 || got[0].TaskKey != "a" {
		t.Fatalf("first claim: %+v (only a is ready)", got)
	}
	_, ts := h.run("run1")
	a := ts["a"]
	if a.State != domain.TaskRunning || a.FencingToken != h.index || a.LeaseOwner != "w1" {
		t.Fatalf("a after claim: %+v", a)
	}
	if !h.complete(Claimed{TaskID: "run1/a", FencingToken: a.FencingToken}, `{"v":1}`) {
		t.Fatal("complete a rejected")
	}
	got := h.claim("w1", 10)
	if len(got) != 2 {
		t.Fatalf("after a: claimed %d, want b and c", len(got))
	}
	for _, c := range got {
		if string(c.DepResults["a"]) != `{"v":1}` {
			t.Fatalf("%s dep_results = %s", c.TaskKey, c.DepResults)
		}
		if h.taskState("run1", "d") != domain.TaskPending {
			t.Fatal("d became ready before both deps finished")
		}
		h.complete(c, `"`+c.TaskKey+`"`)
	}
	d := h.claimOne("w2")
	if d.TaskKey != "d" || len(d.DepResults) != 2 {
		t.Fatalf("d claim: %+v", d)
	}
	if h.runState("run1") != domain.RunRunning {
		t.Fatal("run finished early")
	}
	h.complete(d, "")
	r, _ := h.run("run1")
	if r.State != domain.RunSucceeded || r.FinishedAt == 0 {
		t.Fatalf("run: %+v", r)
	}
	// Resubmission of the same id is idempotent.
	if again := h.submit("run1", diamond); again.Created || again.State != domain.RunSucceeded {
		t.Fatalf("resubmit: %+v", again)
	}
}

// The FlowForge stale-worker story: claim, acknowledge, stall past the
// lease, reap (an attempt spent, retried after its backoff), reclaim, late
// write rejected, current write accepted.
func TestFencingStaleWorker(t *testing.T) {
	h := newHarness(t)
	h.submit("r", `{"tasks":[{"key":"x","type":"echo","lease_ms":1000,"retry":{"max_attempts":3,"initial_backoff_ms":100}}]}`)
	first := h.claimOne("w1")
	t1 := first.FencingToken
	if !h.ok(&Heartbeat{TaskID: first.TaskID, Token: t1}).(*AckResult).Accepted {
		t.Fatal("heartbeat rejected")
	}
	h.now += 1001
	if n := h.ok(&Reap{}).(*CountResult).Count; n != 1 {
		t.Fatalf("reaped %d", n)
	}
	if s := h.taskState("r", "x"); s != domain.TaskRetrying {
		t.Fatalf("after reap: %s", s)
	}
	h.wantNoClaim("w2") // backing off
	h.now += 100
	h.ok(&Tick{})
	second := h.claimOne("w2")
	if second.Attempt != 2 {
		t.Fatalf("second claim is attempt %d, want 2", second.Attempt)
	}
	t2 := second.FencingToken
	if t2 <= t1 {
		t.Fatalf("token did not increase: %d then %d", t1, t2)
	}
	if h.ok(&Heartbeat{TaskID: first.TaskID, Token: t1}).(*AckResult).Accepted {
		t.Fatal("stale heartbeat accepted")
	}
	if h.complete(first, `"late"`) {
		t.Fatal("stale completion accepted")
	}
	if !h.complete(second, `"fresh"`) {
		t.Fatal("current completion rejected")
	}
	_, ts := h.run("r")
	x := ts["x"]
	if string(x.Result) != `"fresh"` || x.State != domain.TaskSucceeded {
		t.Fatalf("result %s state %s", x.Result, x.State)
	}
	if len(x.Attempts) != 2 || x.Attempts[0].Outcome != OutcomeLeaseExpired || x.Attempts[1].Worker != "w2" {
		t.Fatalf("attempts: %+v", x.Attempts)
	}
	// A retried completion with the winning token is still accepted.
	if !h.complete(second, `"fresh"`) {
		t.Fatal("idempotent retry of the accepted completion was rejected")
	}
}

func TestRetriesReuseRow(t *testing.T) {
	h := newHarness(t)
	h.submit("r", `{"tasks":[{"key":"x","type":"flaky","retry":{"max_attempts":3,"initial_backoff_ms":100,"max_backoff_ms":1000}}]}`)
	c := h.claimOne("w")
	startedAt := h.now
	for i := 0; i < 2; i++ {
		h.now += 10
		if !h.fail(c, "boom", true) {
			t.Fatal("fail rejected")
		}
		_, ts := h.run("r")
		if ts["x"].State != domain.TaskRetrying {
			t.Fatalf("after failure %d: %s", i+1, ts["x"].State)
		}
		if got := h.claim("w", 1); len(got) != 0 {
			t.Fatal("claimed a task that is waiting for its backoff")
		}
		h.now = ts["x"].RetryAt
		h.ok(&Tick{})
		c = h.claimOne("w")
	}
	h.complete(c, `1`)
	r, ts := h.run("r")
	x := ts["x"]
	if r.State != domain.RunSucceeded || x.Attempt != 3 || len(x.Attempts) != 3 || x.StartedAt != startedAt {
		t.Fatalf("run %s attempt %d history %d started %d want %d", r.State, x.Attempt, len(x.Attempts), x.StartedAt, startedAt)
	}
	// Exhausting attempts fails the run.
	h.submit("r2", `{"tasks":[{"key":"x","type":"flaky","retry":{"max_attempts":2,"initial_backoff_ms":1}}, {"key":"y","type":"echo","deps":["x"]}]}`)
	c = h.claimOne("w")
	h.fail(c, "one", true)
	h.now += 10
	h.ok(&Tick{})
	c = h.claimOne("w")
	h.fail(c, "two", true)
	r, ts = h.run("r2")
	if r.State != domain.RunFailed || ts["x"].State != domain.TaskFailed || ts["y"].State != domain.TaskCancelled {
		t.Fatalf("run %s x %s y %s", r.State, ts["x"].State, ts["y"].State)
	}
}

func TestBadEntriesChangeNothing(t *testing.T) {
	h := newHarness(t)
	h.submit("r", diamond)
	before := h.digest()
	for _, data := range [][]byte{nil, {0}, {99, '{', '}'}, {byte(MsgSubmit), 'x'}, append([]byte{byte(MsgComplete)}, []byte(`{"task_id":7}`)...)} {
		h.index++
		res := h.f.Apply(Entry{Index: h.index, Data: data})
		if _, isErr := res.(error); !isErr {
			t.Fatalf("entry %q: result %#v, want error", data, res)
		}
	}
	// An invalid spec is re-validated inside Apply.
	wantErr(t, h.apply(&Submit{ID: "bad", Spec: domain.Spec{}}), domain.ErrInvalidSpec)
	wantErr(t, h.apply(&Submit{ID: "bad/id", Spec: domain.Spec{}}), domain.ErrInvalidArgument)
	wantErr(t, h.apply(&Complete{TaskID: "nope/x", Token: 1}), domain.ErrNotFound)
	// An unknown command flagged IgnoreUnknown is skipped without error.
	h.index++
	if res := h.f.Apply(Entry{Index: h.index, Data: []byte{byte(IgnoreUnknown | 100), '{', '}'}}); res != nil {
		t.Fatalf("ignorable unknown command: %#v", res)
	}
	after := h.digest()
	// Only the applied index differs; compare everything else.
	if before == after {
		t.Fatal("applied index did not advance")
	}
	h2 := newHarness(t)
	h2.submit("r", diamond)
	h2.f.applied.Store(0)
	h2.index = h.index - 1
	h2.ok(&Noop{})
	if h2.digest() != after {
		t.Fatal("rejected entries changed state beyond the applied index")
	}
}

func TestSkipsEntriesAtOrBelowApplied(t *testing.T) {
	h := newHarness(t)
	h.submit("r", diamond)
	h.claimOne("w")
	d := h.digest()
	// Raft replays the log after a restart: nothing is applied twice.
	f2, err := New(h.f.Store(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	res := f2.ApplyBatch(h.log)
	for _, r := range res {
		if r != nil {
			t.Fatalf("replayed entry produced %#v", r)
		}
	}
	if got, _, _ := f2.Digest(); got != d {
		t.Fatal("replay changed state")
	}
}

func TestApplyBatchEqualsOneByOne(t *testing.T) {
	h := newHarness(t)
	h.submit("r", diamond)
	c := h.claimOne("w")
	h.complete(c, `1`)
	for _, c := range h.claim("w", 5) {
		h.complete(c, `2`)
	}
	h.complete(h.claimOne("w"), `3`)
	f2, _ := New(store.NewMemStore(), Options{})
	f2.ApplyBatch(h.log)
	if got, _, _ := f2.Digest(); got != h.digest() {
		t.Fatal("batched apply diverged from one-by-one apply")
	}
}

func TestEventsCarryIndexAndResume(t *testing.T) {
	h := newHarness(t)
	h.submit("r", diamond)
	c := h.claimOne("w")
	evs, _, err := h.f.Events(0, "", 0)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events: %v %d", err, len(evs))
	}
	last := evs[len(evs)-1]
	if last.Index != h.index || last.Transition != domain.EdgeClaim || last.TaskKey != c.TaskKey {
		t.Fatalf("last event %+v", last)
	}
	from, _, _ := h.f.Events(last.Index, "", 0)
	if len(from) != 1 {
		t.Fatalf("resume from %d gave %d events", last.Index, len(from))
	}
	// A bounded window: trim and ask for an old index.
	h.ok(&SettingsSet{EventWindow: ptr(100)})
	for i := 0; i < 60; i++ {
		h.submit("x"+itoa(i), `{"tasks":[{"key":"a","type":"t"}]}`)
	}
	_, oldest, err := h.f.Events(1, "", 0)
	if !errors.Is(err, ErrEventsTrimmed) || !strings.Contains(err.Error(), fmt.Sprintf("resume from index %d", oldest)) {
		t.Fatalf("old index: %v (oldest %d)", err, oldest)
	}
	if evs, _, err := h.f.Events(oldest, "", 0); err != nil || len(evs) == 0 || evs[0].Index != oldest {
		t.Fatalf("resume from the reported oldest index %d: %v %d events", oldest, err, len(evs))
	}
	// The window holds exactly what the counter says: no orphaned events.
	stored := 0
	_ = h.f.View(func(r Reader) error {
		return r.Scan(pfxEvent, nil, false, func(_, v []byte) bool {
			var evs []Event
			_ = unmarshal(v, &evs)
			stored += len(evs)
			return true
		})
	})
	ctr, _ := h.f.Counters()
	if stored != ctr.Events || stored > 100+eventTrimSlack(100) {
		t.Fatalf("%d events stored, counter says %d, window 100 (+%d before a trim)", stored, ctr.Events, eventTrimSlack(100))
	}
}

func ptr[T any](v T) *T { return &v }

func TestSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t)
	h.submit("r", diamond)
	h.claimOne("w")
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	f2, _ := New(store.NewMemStore(), Options{})
	if err := f2.Restore(strings.NewReader(buf.String())); err != nil {
		t.Fatal(err)
	}
	d2, idx, _ := f2.Digest()
	if d2 != h.digest() || idx != h.index || f2.AppliedIndex() != h.index {
		t.Fatal("restored state differs")
	}
	if err := f2.Restore(strings.NewReader(buf.String()[:buf.Len()-3])); err == nil {
		t.Fatal("truncated snapshot accepted")
	}
}

func TestClaimResultJSON(t *testing.T) {
	h := newHarness(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"echo","input":{"n":1}}]}`)
	c := h.claimOne("w")
	b, _ := json.Marshal(c)
	for _, f := range []string{"task_id", "run_id", "task_key", "type", "input", "attempt", "fencing_token", "lease_expires_at", "dep_results"} {
		if !strings.Contains(string(b), `"`+f+`"`) {
			t.Fatalf("claimed JSON lacks %s: %s", f, b)
		}
	}
}

// A Multi entry applies each sub-command with its own result; a failing
// one changes nothing while the others take effect, whether they share the
// entry's caches (complete, fail, heartbeat) or run isolated (the rest).
func TestMultiMixesSharedAndIsolatedCommands(t *testing.T) {
	h := newHarness(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t"},{"key":"c","type":"t"},{"key":"d","type":"t","deps":["a"]}]}`)
	got := h.claim("w", 3)
	if len(got) != 3 {
		t.Fatalf("claimed %d", len(got))
	}
	enc := h.encode
	byKey := map[string]Claimed{}
	for _, c := range got {
		byKey[c.TaskKey] = c
	}
	retry := false
	multi := &Multi{Cmds: [][]byte{
		enc(&Complete{TaskID: byKey["a"].TaskID, Token: byKey["a"].FencingToken, Result: json.RawMessage(`1`)}),
		enc(&Heartbeat{TaskID: "r/nope", Token: 1}),
		enc(&Complete{TaskID: byKey["b"].TaskID, Token: byKey["b"].FencingToken,
			Spawn: []domain.TaskSpec{{Key: "a", Type: "t"}}}), // duplicate key: rejected, isolated
		enc(&Fail{TaskID: byKey["c"].TaskID, Token: byKey["c"].FencingToken, Error: "x", Retryable: &retry}),
		enc(&Submit{ID: "r2", Spec: domain.Spec{Tasks: []domain.TaskSpec{{Key: "z", Type: "t"}}}}),
	}}
	res := h.ok(multi).(*MultiResult).Results
	if ack, ok := res[0].(*AckResult); !ok || !ack.Accepted {
		t.Fatalf("complete a: %#v", res[0])
	}
	wantErr(t, res[1], domain.ErrNotFound)
	wantErr(t, res[2], domain.ErrInvalidSpec)
	if ack, ok := res[3].(*AckResult); !ok || !ack.Accepted {
		t.Fatalf("fail c: %#v", res[3])
	}
	if sub, ok := res[4].(*SubmitResult); !ok || !sub.Created {
		t.Fatalf("submit r2: %#v", res[4])
	}
	_, ts := h.run("r")
	if ts["a"].State != domain.TaskSucceeded || ts["b"].State != domain.TaskRunning || ts["c"].State != domain.TaskFailed || ts["d"].State != domain.TaskCancelled {
		t.Fatalf("a %s b %s c %s d %s", ts["a"].State, ts["b"].State, ts["c"].State, ts["d"].State)
	}
	// Replaying the same log gives the same state.
	f2, _ := New(store.NewMemStore(), Options{})
	f2.ApplyBatch(h.log)
	if d, _, _ := f2.Digest(); d != h.digest() {
		t.Fatal("multi entry is not deterministic under replay")
	}
}

func TestLatestEvents(t *testing.T) {
	h := newHarness(t)
	h.submit("r1", diamond)
	h.submit("r2", `{"tasks":[{"key":"x","type":"t"}]}`)
	all, _, _ := h.f.Events(0, "", 0)
	last, err := h.f.LatestEvents("", 3)
	if err != nil || len(last) != 3 {
		t.Fatalf("%v %d", err, len(last))
	}
	for i, e := range last {
		if want := all[len(all)-3+i]; e.Index != want.Index || e.Seq != want.Seq {
			t.Fatalf("latest[%d] = %d/%d, want %d/%d", i, e.Index, e.Seq, want.Index, want.Seq)
		}
	}
	r1, _ := h.f.LatestEvents("r1", 2)
	if len(r1) != 2 || r1[0].RunID != "r1" || r1[1].RunID != "r1" || r1[0].Index > r1[1].Index {
		t.Fatalf("run filter: %+v", r1)
	}
}

// A large batch is split into several store transactions at entry
// boundaries, and a rejected entry in the middle is undone in place; the
// result equals applying the entries one at a time.
func TestLargeBatchSplitsAndRejectsInPlace(t *testing.T) {
	big := strings.Repeat("x", 600<<10)
	var entries []Entry
	for i := 0; i < 12; i++ {
		var cmd Command = &Submit{ID: fmt.Sprintf("big%02d", i), Spec: domain.Spec{Tasks: []domain.TaskSpec{
			{Key: "a", Type: "t", Input: json.RawMessage(`"` + big + `"`)}}}.Normalize()}
		if i == 5 {
			cmd = &Submit{ID: "bad/id"} // rejected
		}
		cmd.Stamp(1_700_000_000_000)
		buf, _ := Encode(cmd)
		entries = append(entries, Entry{Index: uint64(i + 1), Data: buf})
	}
	batched, _ := New(store.NewMemStore(), Options{})
	res := batched.ApplyBatch(entries)
	if _, isErr := res[5].(error); !isErr {
		t.Fatalf("entry 6: %#v", res[5])
	}
	single, _ := New(store.NewMemStore(), Options{})
	for _, e := range entries {
		single.Apply(e)
	}
	d1, i1, _ := batched.Digest()
	d2, i2, _ := single.Digest()
	if d1 != d2 || i1 != 12 || i2 != 12 || len(batched.RunIDs()) != 11 {
		t.Fatalf("batched %s@%d, one by one %s@%d, runs %d", d1, i1, d2, i2, len(batched.RunIDs()))
	}
}

// Now is the clock as of the last commit: it follows applied stamps (never
// back), and a reopened or restored FSM answers the clock of its state.
func TestNowFollowsCommitsReopenAndRestore(t *testing.T) {
	h := newHarness(t)
	if got := h.f.Now(); got != 0 {
		t.Fatalf("empty FSM: now %d", got)
	}
	h.submit("r1", `{"tasks":[{"key":"a","type":"t"}]}`)
	if got := h.f.Now(); got != h.now {
		t.Fatalf("now %d after an entry stamped %d", got, h.now)
	}
	stamped := h.now
	h.now -= 5000 // a stamp behind the clock does not move it back
	h.submit("r2", `{"tasks":[{"key":"a","type":"t"}]}`)
	if got := h.f.Now(); got != stamped {
		t.Fatalf("now %d, want %d", got, stamped)
	}
	again, err := New(h.f.Store(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Now(); got != stamped {
		t.Fatalf("reopened: now %d, want %d", got, stamped)
	}
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	other := newHarness(t)
	if err := other.f.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if got := other.f.Now(); got != stamped {
		t.Fatalf("restored: now %d, want %d", got, stamped)
	}
}

// Once the event window is full, the oldest events are trimmed in steps of
// eventTrimSlack, not after every entry: the count stays within the window
// plus the slack, a trim brings it back to the window, and most entries do
// not trim (each trim is a scan of the stored events).
func TestEventWindowIsTrimmedInSteps(t *testing.T) {
	h := newSem(t)
	const window = 200
	h.ok(&SettingsSet{EventWindow: ptr(window)})
	slack := eventTrimSlack(window)
	entries, trims := 0, 0
	last := uint64(0)
	for i := range 300 {
		h.submit("s"+itoa(i), `{"tasks":[{"key":"a","type":"t"}]}`)
		entries++
		c, err := h.f.Counters()
		if err != nil {
			t.Fatal(err)
		}
		if c.Events > window+slack {
			t.Fatalf("after entry %d: %d events, window %d + slack %d", h.index, c.Events, window, slack)
		}
		if c.TrimmedThrough != last {
			trims++
			last = c.TrimmedThrough
			if c.Events > window {
				t.Fatalf("a trim at entry %d left %d events, window %d", h.index, c.Events, window)
			}
		}
	}
	if trims == 0 || trims > entries/4 {
		t.Fatalf("%d trims in %d entries (slack %d events): want a trim per slack's worth of events", trims, entries, slack)
	}
}
