package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flowd/flowd/fsm/store"
)

// The mirror's two trees read exactly as one tree holding the same keys:
// every point read, prefix probe and scan, forward and reverse, from any
// start, over prefixes inside one tree and prefixes covering both (the
// run indexes' keys interleave with the others: rp/ lies between rf/ and
// rs/).
func TestMirrorReadsAsOneTree(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	m, one := newMirror(), store.NewTree()
	prefixes := []string{"rs/running/", "rs/succeeded/", "rf/", "rp/", "q/", "l/", "m/", "wc/", "qs/"}
	var keys [][]byte
	for range 3000 {
		k := []byte(fmt.Sprintf("%s%05d", prefixes[rng.IntN(len(prefixes))], rng.IntN(2000)))
		keys = append(keys, k)
		if rng.IntN(5) == 0 {
			m.Delete(k)
			one.Delete(k)
			continue
		}
		v := []byte(fmt.Sprint(rng.Int()))
		m.Put(k, v)
		one.Put(k, v)
	}
	snap := m.Clone()
	m.Put([]byte("rs/running/after-the-clone"), []byte("x")) // the snapshot does not see it
	one2 := one.Clone()
	one.Put([]byte("rs/running/after-the-clone"), []byte("x"))
	type pair struct{ k, v string }
	collect := func(r store.Reader, prefix, start []byte, reverse bool, limit int) []pair {
		var out []pair
		_ = r.Scan(prefix, start, reverse, func(k, v []byte) bool {
			out = append(out, pair{string(k), string(v)})
			return len(out) < limit
		})
		return out
	}
	for _, c := range []struct {
		name string
		m    *mirror
		one  *store.Tree
	}{{"live", m, one}, {"snapshot", snap, one2}} {
		scanPrefixes := append([]string{"", "r", "rs", "rs/", "rf/", "q", "qs/", "m/", "zz"}, prefixes...)
		for _, p := range scanPrefixes {
			if got, want := c.m.MayHavePrefix([]byte(p)), c.one.MayHavePrefix([]byte(p)); got != want {
				t.Fatalf("%s: MayHavePrefix(%q) = %v, one tree %v", c.name, p, got, want)
			}
			for range 20 {
				var start []byte
				if rng.IntN(3) > 0 {
					start = keys[rng.IntN(len(keys))]
				}
				reverse, limit := rng.IntN(2) == 0, 1+rng.IntN(4000)
				got := collect(c.m, []byte(p), start, reverse, limit)
				want := collect(c.one, []byte(p), start, reverse, limit)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s: scan %q from %q reverse=%v limit %d: %d pairs, one tree %d", c.name, p, start, reverse, limit, len(got), len(want))
				}
			}
		}
		for _, k := range append(keys, []byte("rs/running/after-the-clone")) {
			gv, gok, _ := c.m.Get(k)
			wv, wok, _ := c.one.Get(k)
			if gok != wok || !bytes.Equal(gv, wv) {
				t.Fatalf("%s: Get(%q) = %q %v, one tree %q %v", c.name, k, gv, gok, wv, wok)
			}
		}
	}
	if m.runs.Len() == 0 || m.hot.Len() == 0 {
		t.Fatalf("the run indexes went to one tree: %d run-index keys, %d others", m.runs.Len(), m.hot.Len())
	}
	for _, p := range []string{"q/", "l/", "m/", "rp/"} {
		if m.runs.MayHavePrefix([]byte(p)) {
			t.Fatalf("the run indexes' tree holds %s keys", p)
		}
	}
}
