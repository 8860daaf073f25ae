package store

import (
	"bytes"
	"maps"
	"sort"
	"strings"
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
		outer := NewOverlay(r)
		inner := NewOverlay(outer)
		for layer, o := range []*Overlay{outer, inner} {
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

// A key set with SetNewOwned (known absent below) and deleted again in the same
// overlay leaves no write at all; overwriting keeps that; undoing the
// delete brings the value back; any other delete is a tombstone.
func TestOverlaySetNewDeletesWithoutTombstone(t *testing.T) {
	base := NewMemStore()
	if err := base.Commit([][]Write{{{Key: []byte("k/old"), Val: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	r, release, _ := base.View()
	defer release()
	o := NewOverlay(r)
	o.SetNewOwned([]byte("k/new"), []byte("1"))
	_ = o.Set([]byte("k/new"), []byte("2"))
	o.Begin()
	_ = o.Delete([]byte("k/new"))
	if _, ok, _ := o.Get([]byte("k/new")); ok {
		t.Fatal("deleted key still visible")
	}
	o.Rollback()
	if v, ok, _ := o.Get([]byte("k/new")); !ok || string(v) != "2" {
		t.Fatalf("after undoing the delete: %q %v", v, ok)
	}
	_ = o.Delete([]byte("k/new"))
	_ = o.Delete([]byte("k/old"))
	ws := o.Writes()
	if len(ws) != 1 || string(ws[0].Key) != "k/old" || ws[0].Val != nil {
		t.Fatalf("writes %+v, want only the tombstone of k/old", ws)
	}
}

// MayHavePrefix never says false for a prefix a Scan would find keys
// under, through an overlay over a tree; it says false for a prefix with
// nothing under it, and leaves a buffered tombstone to the scan.
func TestOverlayMayHavePrefixNeverMissesAKey(t *testing.T) {
	base := NewTree()
	held := []byte("lease/w/r1/x")
	base.Put(held, []byte{})
	o := NewOverlay(base)
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
	check("a key in the base", []byte("lease/w/r1/"), true)
	check("nothing anywhere", []byte("lease/w/r2/"), false)
	check("a prefix that extends another", []byte("lease/w/r/"), false)
	_ = o.Set([]byte("lease/w/r2/y"), []byte{})
	check("a key written in the overlay", []byte("lease/w/r2/"), true)
	_ = o.Delete(held)
	if !o.MayHavePrefix([]byte("lease/w/r1/")) || scanFinds([]byte("lease/w/r1/")) {
		t.Fatal("a deleted key: MayHavePrefix may say true (the scan decides), the scan must find nothing")
	}
	if NewOverlay(nonProber{base}).MayHavePrefix([]byte("none/")) != true {
		t.Fatal("over a base that cannot tell, MayHavePrefix must say true")
	}
}

// nonProber hides a Reader's MayHavePrefix.
type nonProber struct{ Reader }

// Rollback and RollbackTo restore what a unit changed, sizes included, and
// Writes holds only what survived.
func TestOverlayJournalUndoesInPlace(t *testing.T) {
	base := NewMemStore()
	if err := base.Commit([][]Write{{{Key: []byte("a"), Val: []byte("0")}}}); err != nil {
		t.Fatal(err)
	}
	r, release, _ := base.View()
	defer release()
	pool := NewPool()
	o := pool.Overlay(r)
	o.Begin()
	_ = o.Set([]byte("a"), []byte("1"))
	o.End()
	size := o.Size()
	o.Begin()
	if !o.Journaling() {
		t.Fatal("not journaling after Begin")
	}
	_ = o.Set([]byte("b"), []byte("2"))
	sp := o.Mark()
	_ = o.Delete([]byte("a"))
	o.SetOwned([]byte("c"), []byte("3"))
	o.RollbackTo(sp)
	if v, ok, _ := o.Get([]byte("a")); !ok || string(v) != "1" {
		t.Fatalf("a after RollbackTo: %q %v, want 1", v, ok)
	}
	if _, ok, _ := o.Get([]byte("c")); ok {
		t.Fatal("c survived RollbackTo")
	}
	if _, ok, _ := o.Get([]byte("b")); !ok {
		t.Fatal("b, written before the savepoint, was undone")
	}
	o.Rollback()
	if o.Journaling() || o.Size() != size || o.EntrySize() != 0 || o.Len() != 1 {
		t.Fatalf("after Rollback: journaling %v size %d (want %d) entry %d len %d", o.Journaling(), o.Size(), size, o.EntrySize(), o.Len())
	}
	ws := o.Writes()
	if len(ws) != 1 || string(ws[0].Key) != "a" || string(ws[0].Val) != "1" {
		t.Fatalf("writes %+v, want a=1 only", ws)
	}
	pool.Recycle(o)
	if n := pool.Overlay(r).Len(); n != 0 {
		t.Fatalf("a recycled overlay's successor starts with %d writes", n)
	}
}

// Any sequence of sets, new-key sets, deletes and journaled units (ended,
// rolled back whole or to a savepoint) leaves the overlay reading, scanning,
// sizing and writing exactly as a model that replays only what survived:
// each key's cell, its place in the key order and its journal agree.
func TestOverlayCellsMatchModelThroughUndo(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		keys := []string{"a", "a/1", "a/2", "b", "b/1", "c"}
		base := NewMemStore()
		below := map[string]bool{}
		var ws []Write
		for _, k := range rapid.SliceOfNDistinct(rapid.SampledFrom(keys), 0, 3, rapid.ID[string]).Draw(rt, "base") {
			ws = append(ws, Write{Key: []byte(k), Val: []byte("base")})
			below[k] = true
		}
		_ = base.Commit([][]Write{ws})
		r, release, _ := base.View()
		defer release()
		pool := NewPool()
		o := pool.Overlay(r)
		// The model: what the overlay buffers (nil value = tombstone), and
		// its size; a unit's savepoints are copies of it.
		// born: set with SetNewOwned and not deleted since, so a delete
		// drops it (no tombstone, no bytes).
		type state struct {
			buf  map[string][]byte
			born map[string]bool
			size int
		}
		copyState := func(s state) state {
			c := state{buf: maps.Clone(s.buf), born: maps.Clone(s.born), size: s.size}
			if c.buf == nil {
				c.buf, c.born = map[string][]byte{}, map[string]bool{}
			}
			return c
		}
		cur := copyState(state{})
		var unitStart state
		var marks []struct {
			sp Savepoint
			st state
		}
		for i := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			k := rapid.SampledFrom(keys).Draw(rt, "key")
			v := []byte{byte('0' + i%10)}
			switch op := rapid.IntRange(0, 8).Draw(rt, "op"); {
			case op <= 2:
				_ = o.Set([]byte(k), v)
				cur.buf[k], cur.size = v, cur.size+len(k)+len(v)+16
			case op == 3:
				_, buffered := cur.buf[k]
				if below[k] || buffered {
					continue // SetNewOwned is only for keys absent below and not buffered
				}
				o.SetNewOwned([]byte(k), v)
				cur.buf[k], cur.born[k], cur.size = v, true, cur.size+len(k)+len(v)+16
			case op <= 5:
				_ = o.Delete([]byte(k))
				if cur.born[k] {
					delete(cur.buf, k)
					delete(cur.born, k)
				} else {
					cur.buf[k], cur.size = nil, cur.size+len(k)+16
				}
			case op == 6 && !o.Journaling():
				o.Begin()
				unitStart, marks = copyState(cur), nil
			case op == 6:
				marks = append(marks, struct {
					sp Savepoint
					st state
				}{o.Mark(), copyState(cur)})
			case op == 7 && o.Journaling() && len(marks) > 0:
				m := marks[len(marks)-1]
				marks = marks[:len(marks)-1]
				o.RollbackTo(m.sp)
				cur = copyState(m.st)
			case op == 7 && o.Journaling():
				o.Rollback()
				cur = copyState(unitStart)
			case op == 8 && o.Journaling():
				o.End()
			}
		}
		// Read the overlay's writes and check each against the model.
		got := map[string][]byte{}
		var order []string
		for _, w := range o.Writes() {
			got[string(w.Key)] = w.Val
			order = append(order, string(w.Key))
		}
		if !sort.StringsAreSorted(order) {
			rt.Fatalf("writes out of key order: %v", order)
		}
		for k, v := range cur.buf {
			gv, ok := got[k]
			switch {
			case v != nil && (!ok || !bytes.Equal(gv, v)):
				rt.Fatalf("key %s: write %q (present %v), model %q", k, gv, ok, v)
			case v == nil && (!ok || gv != nil):
				rt.Fatalf("key %s: write %q (present %v), model a tombstone", k, gv, ok)
			}
			val, found, _ := o.Get([]byte(k))
			if found != (v != nil) || !bytes.Equal(val, v) {
				rt.Fatalf("Get(%s) = %q %v, model %q", k, val, found, v)
			}
		}
		for k := range got {
			if _, ok := cur.buf[k]; !ok {
				rt.Fatalf("key %s written, the model has nothing buffered", k)
			}
		}
		if o.Len() != len(got) {
			rt.Fatalf("Len %d, writes %d", o.Len(), len(got))
		}
		// Scans merge the survivors with the base.
		var scanned []string
		_ = o.Scan(nil, nil, false, func(k, _ []byte) bool { scanned = append(scanned, string(k)); return true })
		var want []string
		for _, k := range keys {
			if v, ok := cur.buf[k]; ok {
				if v != nil {
					want = append(want, k)
				}
			} else if below[k] {
				want = append(want, k)
			}
		}
		if strings.Join(scanned, ",") != strings.Join(want, ",") {
			rt.Fatalf("scan %v, want %v", scanned, want)
		}
		if o.Journaling() {
			o.End()
		}
		if o.Size() != cur.size {
			rt.Fatalf("size %d, model %d", o.Size(), cur.size)
		}
		pool.Recycle(o)
		if n := pool.Overlay(r).Len(); n != 0 {
			rt.Fatalf("a recycled overlay's successor starts with %d writes", n)
		}
	})
}
