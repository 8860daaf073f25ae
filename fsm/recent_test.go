package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flowd/flowd/fsm/store"
)

// The applier's view serves records from the values recent commits wrote;
// whatever was written, overwritten or deleted, and however many
// generations rotated, it must read exactly what the durable store holds.
func TestApplyViewReadsWhatTheStoreHolds(t *testing.T) {
	inner := store.NewMemStore()
	s, err := NewIndexedStore(inner)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([][]byte, 0, 3*recentEntries)
	for i := range 3 * recentEntries {
		keys = append(keys, []byte(fmt.Sprintf("t/run%06d/k", i)))
	}
	keys = append(keys, []byte("r/some-run"), []byte("rsp/some-run"))
	for round := range 40 {
		batch := make([]store.Write, 0, 4096)
		for range 4096 {
			k := keys[rng.IntN(len(keys))]
			var v []byte
			if rng.IntN(4) != 0 {
				v = []byte(fmt.Sprintf(`{"error":"v%d-%d"}`, round, rng.Int()))
			}
			batch = append(batch, store.Write{Key: k, Val: v})
		}
		if err := s.Commit([][]store.Write{batch}); err != nil {
			t.Fatal(err)
		}
		av, releaseA, err := s.ApplyView()
		if err != nil {
			t.Fatal(err)
		}
		iv, releaseI, err := inner.View()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			got, gok, err1 := av.Get(k)
			want, wok, err2 := iv.Get(k)
			if err1 != nil || err2 != nil || gok != wok || !bytes.Equal(got, want) {
				t.Fatalf("round %d key %s: apply view %q %v %v, store %q %v %v", round, k, got, gok, err1, want, wok, err2)
			}
		}
		releaseA()
		releaseI()
	}
	// A restore replaces everything: nothing cached may survive it.
	if err := s.Replace(func(put func(k, v []byte) error) error { return put([]byte("r/other"), []byte(`{"id":"other"}`)) }); err != nil {
		t.Fatal(err)
	}
	av, release, _ := s.ApplyView()
	defer release()
	if _, ok, _ := av.Get([]byte("r/some-run")); ok {
		t.Fatal("a record from before the restore is still served")
	}
}
