package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flowd/flowd/fsm/store"
)

// runReadSpy counts the reads of run records that reach the store under the
// index mirror.
type runReadSpy struct {
	store.Store
	runReads *int
}

func (s runReadSpy) View() (store.Reader, func(), error) {
	r, release, err := s.Store.View()
	return spyReader{r, s.runReads}, release, err
}

type spyReader struct {
	store.Reader
	runReads *int
}

func (r spyReader) Get(key []byte) ([]byte, bool, error) {
	if bytes.HasPrefix(key, pfxRun) {
		*r.runReads++
	}
	return r.Reader.Get(key)
}

// The applier's view answers "no such run" from the run filter without
// reading the store, and never hides a run the store holds: runs written
// before the store was opened (the filter rebuilt from the records), after
// it (added by each commit), deleted, and past the filter's first size.
func TestRunFilterNeverHidesAStoredRun(t *testing.T) {
	inner := store.NewMemStore()
	reads := 0
	runRecord := func(id string) []byte {
		b, err := marshal(&Run{ID: id, State: "running"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var before []store.Write
	for i := range 1000 {
		id := fmt.Sprintf("before-%04d", i)
		before = append(before, store.Write{Key: runKey(id), Val: runRecord(id)})
	}
	if err := inner.Commit([][]store.Write{before}); err != nil {
		t.Fatal(err)
	}
	s, err := NewIndexedStore(runReadSpy{inner, &reads})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	ids := make([]string, 0, 2*runFilterMin+1000)
	for i := range 1000 {
		ids = append(ids, fmt.Sprintf("before-%04d", i))
	}
	for len(ids) < cap(ids) { // more than the filter's first set holds
		batch := make([]store.Write, 0, 4096)
		for range 4096 {
			id := fmt.Sprintf("after-%07d", len(ids))
			ids = append(ids, id)
			batch = append(batch, store.Write{Key: runKey(id), Val: runRecord(id)})
			if rng.IntN(8) == 0 { // some are deleted again
				batch = append(batch, store.Write{Key: runKey(ids[rng.IntN(len(ids))])})
			}
		}
		if err := s.Commit([][]store.Write{batch}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.runs.sets); n < 2 {
		t.Fatalf("%d runs filled %d filter set(s), want a second one", len(ids), n)
	}
	av, release, err := s.ApplyView()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	iv, releaseInner, err := inner.View()
	if err != nil {
		t.Fatal(err)
	}
	defer releaseInner()
	for _, id := range ids {
		got, gok, err1 := av.Get(runKey(id))
		want, wok, err2 := iv.Get(runKey(id))
		if err1 != nil || err2 != nil || gok != wok || !bytes.Equal(got, want) {
			t.Fatalf("run %s: the apply view read %v %v, the store holds %v %v", id, gok, err1, wok, err2)
		}
	}
	reads = 0
	const fresh = 10000
	for i := range fresh {
		if _, ok, err := av.Get(runKey(fmt.Sprintf("new-%05d", i))); ok || err != nil {
			t.Fatalf("a run id never written read as stored (%v)", err)
		}
	}
	// At the filter's 1% per set, a few hundred of 10,000 may read through.
	if reads > fresh/10 {
		t.Fatalf("%d of %d reads of run ids never written reached the store; the filter should answer ~99%% of them", reads, fresh)
	}
	// A restore rebuilds the filter from what it loads.
	if err := s.Replace(func(put func(k, v []byte) error) error {
		return put(runKey("restored"), runRecord("restored"))
	}); err != nil {
		t.Fatal(err)
	}
	av2, release2, err := s.ApplyView()
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	if _, ok, _ := av2.Get(runKey("restored")); !ok {
		t.Fatal("a run the restore loaded reads as absent")
	}
	if _, ok, _ := av2.Get(runKey(ids[0])); ok {
		t.Fatal("a run from before the restore reads as stored")
	}
}
