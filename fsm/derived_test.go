package fsm

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// derivedScenario leaves every derived index populated: runs waiting for
// admission, ready tasks (one run's queue paused), leased tasks, and
// retries waiting for their wake-up, runs in several states and a finished
// one, and a run with labels.
func derivedScenario(h *harness) {
	h.submit("done", `{"tasks":[{"key":"a","type":"u"}]}`)
	labelled, _ := domain.ParseSpec([]byte(`{"tasks":[{"key":"a","type":"lab"}]}`), domain.DefaultLimits)
	h.ok(&Submit{ID: "labelled", Spec: labelled, Labels: map[string]string{"env": "prod", "team": "data"}})
	h.complete(h.claim("w", 1, "u")[0], `1`)
	h.submit("idem", `{"tasks":[{"key":"a","type":"v"}]}`)
	h.ok(&Claim{Waiters: []Waiter{{WorkerID: "wr", Types: []string{"v"}, Max: 1, RequestID: "req-1"}}})
	h.ok(&SettingsSet{MaxRunningRuns: ptr(3), BreakerFailures: ptr(-1)})
	for i := range 6 {
		h.submit(fmt.Sprintf("r%d", i), `{"tasks":[{"key":"a","type":"t","retry":{"max_attempts":5,"initial_backoff_ms":60000}},{"key":"b","type":"t","queue":"q2","retry":{"max_attempts":5,"initial_backoff_ms":60000}},{"key":"c","type":"t","deps":["a"]}]}`)
	}
	h.ok(&QueuePause{Name: "q2", RunID: "r1", Paused: true})
	got := h.claim("w", 3, "t")
	h.complete(got[0], `1`)
	retry := true
	h.ok(&Fail{TaskID: got[1].TaskID, Token: got[1].FencingToken, Error: "x", Retryable: &retry})
}

func indexDigest(t *testing.T, f *FSM) string {
	t.Helper()
	d, _, err := f.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The derived indexes live in memory only: the durable store holds none of
// them, yet full scans (digest, snapshot) see exactly the state a store
// holding them would, after a reopen too, and a store written before they
// were derived is cleaned up when opened.
func TestDerivedIndexesAreRebuiltNotStored(t *testing.T) {
	plain := newHarness(t) // every key stored
	derivedScenario(plain)
	want := indexDigest(t, plain.f)

	inner := store.NewMemStore()
	f, _ := indexedFSM(t, inner)
	h := &harness{t: t, f: f, now: plain.now}
	derivedScenario(h)
	if got := indexDigest(t, f); got != want {
		t.Fatalf("digest over the indexed store %s, want %s", got, want)
	}
	storedDerived := func(s store.Store) int {
		r, release, err := s.View()
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		n := 0
		for _, p := range derivedPrefixes {
			_ = r.Scan(p, nil, false, func(_, _ []byte) bool { n++; return true })
		}
		return n
	}
	if n := storedDerived(inner); n != 0 {
		t.Fatalf("the durable store holds %d derived index keys", n)
	}
	pr, release, _ := plain.f.store.View()
	for _, p := range derivedPrefixes {
		n := 0
		_ = pr.Scan(p, nil, false, func(_, _ []byte) bool { n++; return true })
		if n == 0 {
			t.Fatalf("the scenario left no %s keys", p)
		}
	}
	release()

	// Reopen over the same durable state: rebuilt, same digest, and the
	// state machine goes on from it (the paused run's task stays out).
	idx2, err := NewIndexedStore(inner)
	if err != nil {
		t.Fatal(err)
	}
	f2, _ := New(idx2, Options{})
	if got := indexDigest(t, f2); got != want {
		t.Fatalf("digest after reopening %s, want %s", got, want)
	}
	h2 := &harness{t: t, f: f2, index: h.index, now: h.now}
	hp := &harness{t: t, f: plain.f, index: plain.index, now: plain.now}
	for _, x := range []*harness{h2, hp} {
		x.claim("w2", 50)
	}
	if a, b := indexDigest(t, f2), indexDigest(t, plain.f); a != b {
		t.Fatalf("after claiming everything: reopened %s, plain %s", a, b)
	}

	// A store that still holds the derived keys (written before they were
	// derived) is cleaned when opened, and reads the same.
	legacy := plain.f.store
	idx3, err := NewIndexedStore(legacy)
	if err != nil {
		t.Fatal(err)
	}
	if n := storedDerived(legacy); n != 0 {
		t.Fatalf("%d derived keys left in a legacy store after opening it", n)
	}
	f3, _ := New(idx3, Options{})
	if got, want := indexDigest(t, f3), indexDigest(t, f2); got != want {
		t.Fatalf("legacy store after opening: %s, want %s", got, want)
	}

	// Snapshot and restore into a fresh indexed store: same state.
	var buf bytes.Buffer
	snap, err := f2.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	idx4, _ := NewIndexedStore(store.NewMemStore())
	f4, _ := New(idx4, Options{})
	if err := f4.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if got, want := indexDigest(t, f4), indexDigest(t, f2); got != want {
		t.Fatalf("restored %s, want %s", got, want)
	}
}
