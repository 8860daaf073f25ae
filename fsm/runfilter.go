package fsm

import (
	"sync"

	"github.com/bits-and-blooms/bloom/v3"
)

// runFilter is a Bloom filter of the run ids the store holds, for the
// applier's one read that nearly always misses: a submit's check that its
// new run id is not taken. Without it that miss walks the write buffer, the
// recent records, the write-behind window and every level of badger (each
// table's own bloom filter and index) before it can say no: ~5 µs per
// submit on every replica (docs/performance.md, "The new run id's miss").
// "Absent" from the filter is certain, so the read ends there; "maybe" reads
// the store as before.
//
// The filter only grows: a run deleted by retention stays in it (a false
// "maybe", read through as before). It is rebuilt from the records when the
// store is opened or restored (IndexedStore.reload), and a run id is added
// before the commit that writes the run is applied to the inner store, so
// no reader can find the run stored but the filter without it. Full, it
// starts a larger set beside the old ones (a scalable Bloom filter), so
// the false-positive rate stays near runFilterFP however many runs come.
//
// It is read by the applier only (ApplyView): queries read the store, so
// what they see never depends on the filter.
type runFilter struct {
	mu   sync.Mutex
	sets []*bloom.BloomFilter
	size uint // the runs the newest set is sized for
	room uint // adds the newest set takes before it passes runFilterFP
}

const (
	runFilterFP  = 0.01
	runFilterMin = 1 << 16
)

// newRunFilter sizes a filter for n runs and room for as many more.
func newRunFilter(n int) *runFilter {
	f := &runFilter{}
	f.grow(max(2*uint(n), runFilterMin))
	return f
}

func (f *runFilter) grow(n uint) {
	f.sets = append(f.sets, bloom.NewWithEstimates(n, runFilterFP))
	f.size, f.room = n, n
}

// add records run id id. Most calls rewrite a run the filter already
// holds: those add nothing and take no room (an id that tests present,
// truly or falsely, always will: bits are only ever set).
func (f *runFilter) add(id []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holds(id) {
		return
	}
	if f.room == 0 {
		f.grow(2 * f.size)
	}
	f.sets[len(f.sets)-1].Add(id)
	f.room--
}

// mayHold reports whether run id id may be stored; false is certain.
func (f *runFilter) mayHold(id []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.holds(id)
}

func (f *runFilter) holds(id []byte) bool {
	for _, s := range f.sets {
		if s.Test(id) {
			return true
		}
	}
	return false
}
