package fsm

import (
	"testing"

	"github.com/flowd/flowd/fsm/store"
)

// MayHavePrefix never says false for a prefix a Scan would find keys
// under, through an overlay over the indexed store's mirror; it says false
// for a prefix with nothing under it.
func TestMayHavePrefixNeverMissesAKey(t *testing.T) {
	idx, err := NewIndexedStore(store.NewMemStore())
	if err != nil {
		t.Fatal(err)
	}
	held := claimReqKey("w", "r1", "run/a")
	if err := idx.Commit([][]store.Write{{{Key: held, Val: []byte{}}}}); err != nil {
		t.Fatal(err)
	}
	r, release, err := idx.ApplyView()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	o := store.NewOverlay(r)
	scanFinds := func(prefix []byte) bool {
		n := 0
		_ = o.Scan(prefix, nil, false, func(_, _ []byte) bool { n++; return true })
		return n > 0
	}
	check := func(what string, prefix []byte, want bool) {
		t.Helper()
		got := o.MayHavePrefix(prefix)
		if scanFinds(prefix) && !got {
			t.Fatalf("%s: MayHavePrefix false but a scan finds keys", what)
		}
		if got != want {
			t.Fatalf("%s: MayHavePrefix %v, want %v", what, got, want)
		}
	}
	check("a request with a lease in the store", claimReqPrefix("w", "r1"), true)
	check("a fresh request", claimReqPrefix("w", "r2"), false)
	check("a request id that extends another", claimReqPrefix("w", "r"), false)
	if err := o.Set(claimReqKey("w", "r2", "run/b"), []byte{}); err != nil {
		t.Fatal(err)
	}
	check("a lease written in this batch", claimReqPrefix("w", "r2"), true)
	if err := o.Delete(held); err != nil {
		t.Fatal(err)
	}
	if !o.MayHavePrefix(claimReqPrefix("w", "r1")) || scanFinds(claimReqPrefix("w", "r1")) {
		t.Fatal("a deleted lease: MayHavePrefix may say true (the scan decides), the scan must find nothing")
	}
}

// MayHaveReady is false exactly while the ready index is empty, on the
// indexed store (answered from its mirror); a plain store always says true.
func TestMayHaveReadyFollowsTheReadyIndex(t *testing.T) {
	f, _ := indexedFSM(t, store.NewMemStore())
	h := &harness{t: t, f: f, now: 1_700_000_000_000}
	if f.MayHaveReady() {
		t.Fatal("an empty state says work may be ready")
	}
	h.submit("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", `{"tasks":[{"key":"a","type":"t"}]}`)
	if !f.MayHaveReady() {
		t.Fatal("a ready task is not seen")
	}
	c := h.claimOne("w1")
	if f.MayHaveReady() {
		t.Fatal("the only ready task was claimed, yet work may be ready")
	}
	h.complete(c, `{}`)
	if f.MayHaveReady() {
		t.Fatal("nothing is ready after the completion")
	}
	plain := newHarness(t)
	if !plain.f.MayHaveReady() {
		t.Fatal("a store without a mirror must not say false")
	}
}
