package fsm

import "github.com/flowd/flowd/fsm/store"

// applyScratch is what one ApplyBatch leaves for the next to reuse instead
// of allocating again: the write buffers' B-tree nodes and the entry
// journal (a store.Pool), the event list an entry builds, the applier's record
// caches and its comparison buffer, and the slices its writes are committed
// in. None of it outlives the batch that uses it: everything a batch hands
// on (the events it publishes, results, the keys and values it commits) is
// copied out or freshly allocated, and a store does not keep the slices a
// commit gives it (store.Store.Commit). A batch takes
// the scratch and puts it back (FSM.scratch), so two batches never share
// it; one that finds it taken (a concurrent Apply in a test) builds its
// own.
type applyScratch struct {
	overlays *store.Pool
	events   []Event
	caches   [4]cache // runs, taskCache, queues, breakers
	scratch  []byte
	keyBuf   []byte
	txns     [][]store.Write
	writes   []store.Write
}

// Bounds on what is kept: a batch far larger than usual (a restore's
// replay, a huge Multi) leaves its memory to the collector.
const (
	scratchMaxEvents  = 4 << 10
	scratchMaxCache   = 512
	scratchMaxEncoded = 64 << 10
	scratchMaxWrites  = 64 << 10
)

// commitBuffers returns the slices a batch's commit is built in, empty.
func (sc *applyScratch) commitBuffers() ([][]store.Write, []store.Write) {
	return sc.txns[:0], sc.writes[:0]
}

// keepCommitBuffers takes the commit's slices back once the store has the
// writes, cleared (the keys and values are the store's now).
func (sc *applyScratch) keepCommitBuffers(txns [][]store.Write, writes []store.Write) {
	clear(txns)
	clear(writes)
	sc.txns = txns[:0]
	if cap(writes) <= scratchMaxWrites {
		sc.writes = writes[:0]
	}
}

func newApplyScratch() *applyScratch {
	return &applyScratch{overlays: store.NewPool()}
}

// overlay returns a write buffer over base built from the scratch's nodes
// and journal.
func (sc *applyScratch) overlay(base Reader) *store.Overlay { return sc.overlays.Overlay(base) }

// recycle takes back the buffers of overlays whose writes are committed.
func (sc *applyScratch) recycle(os ...*store.Overlay) { sc.overlays.Recycle(os...) }

// lend gives a its caches, event list and comparison buffer.
func (sc *applyScratch) lend(a *applier) {
	a.runs, a.taskCache, a.queues, a.breakers = sc.caches[0], sc.caches[1], sc.caches[2], sc.caches[3]
	sc.caches = [4]cache{}
	a.events, sc.events = sc.events[:0], nil
	a.scratch, sc.scratch = sc.scratch[:0], nil
	a.keyBuf, sc.keyBuf = sc.keyBuf[:0], nil
}

// takeBack keeps a's buffers for the next entry, emptied. Its events must
// have been copied out.
func (sc *applyScratch) takeBack(a *applier) {
	for i, c := range []*cache{&a.runs, &a.taskCache, &a.queues, &a.breakers} {
		if len(c.m) > scratchMaxCache || cap(c.order) > scratchMaxCache || cap(c.slab) > scratchMaxCache {
			continue // let an outsized map go: clearing it costs its size every entry
		}
		c.reset()
		sc.caches[i] = *c
	}
	if cap(a.events) <= scratchMaxEvents {
		clear(a.events[:cap(a.events)])
		sc.events = a.events[:0]
	}
	if cap(a.scratch) <= scratchMaxEncoded {
		sc.scratch = a.scratch[:0]
	}
	if cap(a.keyBuf) <= scratchMaxEncoded {
		sc.keyBuf = a.keyBuf[:0]
	}
}
