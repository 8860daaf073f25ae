package fsm

import (
	"bytes"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

// The overlay's merged scans (forward, reverse, with a start key, stopping
// early) agree with a plain sorted map, over any base and any buffered
// writes and deletes, nested two deep as ApplyBatch nests them.
func TestOverlayScanMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		keyGen := rapid.SampledFrom([]string{"a/1", "a/2", "a/3", "a/4", "a/5", "ab", "b/1", "b/2", "a/", "a"})
		base := NewMemStore()
		model := map[string]string{}
		var ws []Write
		for _, k := range rapid.SliceOfN(keyGen, 0, 8).Draw(rt, "base") {
			ws = append(ws, Write{Key: []byte(k), Val: []byte("base-" + k)})
			model[k] = "base-" + k
		}
		_ = base.Commit([][]Write{ws})
		r, _, _ := base.View()
		outer := newOverlay(r)
		inner := newOverlay(outer)
		for layer, o := range []*overlay{outer, inner} {
			for i, k := range rapid.SliceOfN(keyGen, 0, 25).Draw(rt, "writes") {
				if rapid.Bool().Draw(rt, "delete") {
					_ = o.Delete([]byte(k))
					delete(model, k)
				} else {
					v := string(rune('A'+layer)) + k + string(rune('0'+i%10))
					_ = o.Set([]byte(k), []byte(v))
					model[k] = v
				}
			}
		}
		prefix := rapid.SampledFrom([]string{"a/", "a", "b/", ""}).Draw(rt, "prefix")
		reverse := rapid.Bool().Draw(rt, "reverse")
		var start []byte
		if rapid.Bool().Draw(rt, "has start") {
			start = []byte(keyGen.Draw(rt, "start"))
		}
		limit := rapid.IntRange(1, 12).Draw(rt, "limit")
		var keys []string
		for k := range model {
			if !bytes.HasPrefix([]byte(k), []byte(prefix)) {
				continue
			}
			if start != nil && ((!reverse && k < string(start)) || (reverse && k > string(start))) {
				continue
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if reverse {
			for i, j := 0, len(keys)-1; i < j; i, j = i+1, j-1 {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
		var want []string
		for _, k := range keys {
			want = append(want, k+"="+model[k])
		}
		if len(want) > limit {
			want = want[:limit]
		}
		var got []string
		_ = inner.Scan([]byte(prefix), start, reverse, func(k, v []byte) bool {
			got = append(got, string(k)+"="+string(v))
			return len(got) < limit
		})
		if len(got) != len(want) {
			rt.Fatalf("got %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				rt.Fatalf("got %v, want %v", got, want)
			}
		}
	})
}

// A key set with SetNew (known absent below) and deleted again in the same
// overlay leaves no write at all; overwriting keeps that; undoing the
// delete brings the value back; any other delete is a tombstone.
func TestOverlaySetNewDeletesWithoutTombstone(t *testing.T) {
	base := NewMemStore()
	if err := base.Commit([][]Write{{{Key: []byte("k/old"), Val: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	r, release, _ := base.View()
	defer release()
	o := newOverlay(r)
	_ = o.SetNew([]byte("k/new"), []byte("1"))
	_ = o.Set([]byte("k/new"), []byte("2"))
	o.begin()
	_ = o.Delete([]byte("k/new"))
	if _, ok, _ := o.Get([]byte("k/new")); ok {
		t.Fatal("deleted key still visible")
	}
	o.rollback()
	if v, ok, _ := o.Get([]byte("k/new")); !ok || string(v) != "2" {
		t.Fatalf("after undoing the delete: %q %v", v, ok)
	}
	_ = o.Delete([]byte("k/new"))
	_ = o.Delete([]byte("k/old"))
	ws := o.writes()
	if len(ws) != 1 || string(ws[0].Key) != "k/old" || ws[0].Val != nil {
		t.Fatalf("writes %+v, want only the tombstone of k/old", ws)
	}
}

// mayHavePrefix never says false for a prefix a Scan would find keys
// under, through an overlay over the indexed store's mirror; it says false
// for a prefix with nothing under it.
func TestMayHavePrefixNeverMissesAKey(t *testing.T) {
	idx, err := NewIndexedStore(NewMemStore())
	if err != nil {
		t.Fatal(err)
	}
	held := claimReqKey("w", "r1", "run/a")
	if err := idx.Commit([][]Write{{{Key: held, Val: []byte{}}}}); err != nil {
		t.Fatal(err)
	}
	r, release, err := idx.ApplyView()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	o := newOverlay(r)
	scanFinds := func(prefix []byte) bool {
		n := 0
		_ = o.Scan(prefix, nil, false, func(_, _ []byte) bool { n++; return true })
		return n > 0
	}
	check := func(what string, prefix []byte, want bool) {
		t.Helper()
		got := o.mayHavePrefix(prefix)
		if scanFinds(prefix) && !got {
			t.Fatalf("%s: mayHavePrefix false but a scan finds keys", what)
		}
		if got != want {
			t.Fatalf("%s: mayHavePrefix %v, want %v", what, got, want)
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
	if !o.mayHavePrefix(claimReqPrefix("w", "r1")) || scanFinds(claimReqPrefix("w", "r1")) {
		t.Fatal("a deleted lease: mayHavePrefix may say true (the scan decides), the scan must find nothing")
	}
}

// The task-keyed builders give the bytes of the id-string ones.
func TestTaskKeyedMatchesTheIDKeys(t *testing.T) {
	for _, tk := range []*Task{{RunID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", Key: "job"}, {RunID: "r", Key: "a/b"}, {RunID: "", Key: ""}} {
		for _, c := range []struct {
			name     string
			got, old []byte
		}{
			{"lease", leaseKeyOf(-5, tk), leaseKey(-5, tk.ID())},
			{"wake", wakeKeyOf(1_700_000_000_000, tk), wakeKey(1_700_000_000_000, tk.ID())},
			{"claim request", claimReqKeyOf("w1", "req-9", tk), claimReqKey("w1", "req-9", tk.ID())},
			{"claim request prefix", claimReqKey("w1", "req-9", tk.ID()), append(claimReqPrefix("w1", "req-9"), tk.ID()...)},
			{"ready", readyKeyOf("q", "t", -3, 42, tk), readyKey("q", "t", -3, 42, tk.ID())},
		} {
			if !bytes.Equal(c.got, c.old) {
				t.Errorf("%s key of %+v: %q, want %q", c.name, tk, c.got, c.old)
			}
			if len(c.got) != cap(c.got) {
				t.Errorf("%s key: len %d cap %d (one exact allocation)", c.name, len(c.got), cap(c.got))
			}
		}
	}
}

// MayHaveReady is false exactly while the ready index is empty, on the
// indexed store (answered from its mirror); a plain store always says true.
func TestMayHaveReadyFollowsTheReadyIndex(t *testing.T) {
	f, _ := indexedFSM(t, NewMemStore())
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
