package store

import (
	"bytes"

	"github.com/google/btree"
)

// Overlay is an ordered write buffer over a Reader: reads see the buffered
// writes first, and Writes hands them to Store.Commit. Overlays chain (an
// overlay's base may be another overlay), so a writer can close one buffer
// as one transaction and go on in the next while still reading the first.
//
// An overlay journals the changes of one unit of work (Begin … End): while
// journaling, every change records what it replaced, so the unit, or the
// part of it after a Savepoint, can be undone in place (Rollback,
// RollbackTo) without a write buffer of its own to build and merge.
//
// Sizes count key + value + 16 bytes per write (TxnLimiter's unit). An
// Overlay is not safe for concurrent use.
type Overlay struct {
	base  Reader
	items *btree.BTreeG[item]
	size  int

	journaling bool
	undo       []undoRec
	entrySize  int

	spareIters []*ovIter // see iter
}

type undoRec struct {
	prev item // the replaced item; prev.key == nil if there was none
	key  []byte
}

// NewOverlay returns an empty write buffer over base.
func NewOverlay(base Reader) *Overlay {
	return &Overlay{base: base, items: btree.NewG(16, itemLess)}
}

// Get implements Reader: a buffered write, else the base.
func (o *Overlay) Get(key []byte) ([]byte, bool, error) {
	if it, ok := o.items.Get(item{key: key}); ok {
		return it.val, it.val != nil, nil
	}
	return o.base.Get(key)
}

// Set implements Tx; key is copied, val is kept.
func (o *Overlay) Set(key, val []byte) error {
	o.SetOwned(bytes.Clone(key), val)
	return nil
}

// SetOwned is Set for a key the caller hands over (built for this write
// and not used after it): no copy.
func (o *Overlay) SetOwned(key, val []byte) {
	if val == nil {
		val = []byte{}
	}
	o.put(item{key: key, val: val}, len(key)+len(val)+16)
}

// SetNewOwned is SetOwned for a key the caller knows is absent below this
// overlay (e.g. an index key of a record created in this unit): if it is
// deleted again before the overlay is written, it leaves nothing, not a
// tombstone.
func (o *Overlay) SetNewOwned(key, val []byte) {
	if val == nil {
		val = []byte{}
	}
	o.put(item{key: key, val: val, born: true}, len(key)+len(val)+16)
}

// Delete implements Tx; key is copied.
func (o *Overlay) Delete(key []byte) error {
	if o.dropBorn(key) {
		return nil
	}
	o.put(item{key: bytes.Clone(key)}, len(key)+16)
	return nil
}

// DeleteOwned is Delete for a key the caller hands over (see SetOwned).
func (o *Overlay) DeleteOwned(key []byte) {
	if !o.dropBorn(key) {
		o.put(item{key: key}, len(key)+16)
	}
}

// dropBorn removes key if it was born in this overlay (absent below: no
// tombstone needed) and reports whether it did.
func (o *Overlay) dropBorn(key []byte) bool {
	it, ok := o.items.Get(item{key: key})
	if !ok || !it.born {
		return false
	}
	o.items.Delete(it)
	if o.journaling {
		o.undo = append(o.undo, undoRec{prev: it, key: it.key})
	}
	return true
}

func (o *Overlay) put(it item, n int) {
	prev, had := o.items.ReplaceOrInsert(it)
	if had && prev.born && !it.born && it.val != nil {
		// Overwritten, still absent below: stays born.
		it.born = true
		o.items.ReplaceOrInsert(it)
	}
	o.size += n
	if o.journaling {
		o.undo = append(o.undo, undoRec{prev: prev, key: it.key})
		o.entrySize += n
	}
}

// Begin starts journaling a unit's changes.
func (o *Overlay) Begin() {
	o.journaling, o.undo, o.entrySize = true, o.undo[:0], 0
}

// End stops journaling, keeping the unit's changes.
func (o *Overlay) End() {
	o.journaling, o.undo = false, o.undo[:0]
}

// Journaling reports whether a unit is open (between Begin and End or
// Rollback).
func (o *Overlay) Journaling() bool { return o.journaling }

// Rollback undoes the unit's changes, newest first, and ends it.
func (o *Overlay) Rollback() {
	o.RollbackTo(Savepoint{})
	o.End()
}

// Savepoint marks a point in the unit's journal (Mark).
type Savepoint struct{ undo, size int }

// Mark returns the current point of the unit's journal.
func (o *Overlay) Mark() Savepoint { return Savepoint{len(o.undo), o.entrySize} }

// RollbackTo undoes the changes made since sp, newest first; the unit
// stays open.
func (o *Overlay) RollbackTo(sp Savepoint) {
	for i := len(o.undo) - 1; i >= sp.undo; i-- {
		u := o.undo[i]
		if u.prev.key != nil {
			o.items.ReplaceOrInsert(u.prev)
		} else {
			o.items.Delete(item{key: u.key})
		}
	}
	o.undo = o.undo[:sp.undo]
	o.size -= o.entrySize - sp.size
	o.entrySize = sp.size
}

// Size is the bytes the overlay buffers, as TxnLimiter counts them.
func (o *Overlay) Size() int { return o.size }

// EntrySize is the bytes written since Begin.
func (o *Overlay) EntrySize() int { return o.entrySize }

// Len is the number of buffered writes (tombstones included).
func (o *Overlay) Len() int { return o.items.Len() }

// Scan implements Reader, merging the buffered writes with the base view.
// The buffered side is read lazily, a few items at a time, so a scan that
// stops early (taking the head of a list) costs little however much the
// overlay holds.
func (o *Overlay) Scan(prefix, start []byte, reverse bool, fn func(k, v []byte) bool) error {
	if !o.buffersIn(prefix, start, reverse) {
		// Nothing buffered in the range (the usual case for a scan of a
		// range the batch did not touch): the base alone, without the
		// merge's iterator and closures.
		return o.base.Scan(prefix, start, reverse, fn)
	}
	mine := o.iter()
	defer o.putIter(mine)
	mine.prefix, mine.start, mine.reverse, mine.fn = prefix, start, reverse, fn
	if mine.mergeFn == nil {
		mine.mergeFn = mine.merge
	}
	if err := o.base.Scan(prefix, start, reverse, mine.mergeFn); err != nil || mine.stopped {
		return err
	}
	for {
		it, ok := mine.peek()
		if !ok || !mine.emit(it) {
			return nil
		}
		mine.pop()
	}
}

// merge visits a base key for Scan: the buffered items before it first,
// then the key itself unless a buffered write shadows it.
func (it *ovIter) merge(k, v []byte) bool {
	for {
		x, ok := it.peek()
		if !ok || !it.before(x.key, k) {
			break
		}
		it.pop()
		if !it.emit(x) {
			return false
		}
	}
	if x, ok := it.peek(); ok && bytes.Equal(x.key, k) {
		it.pop()
		return it.emit(x) // the buffered write shadows the base value
	}
	if !it.fn(k, v) {
		it.stopped = true
		return false
	}
	return true
}

func (it *ovIter) before(a, b []byte) bool {
	if it.reverse {
		return bytes.Compare(a, b) > 0
	}
	return bytes.Compare(a, b) < 0
}

// emit hands a buffered item to the scan's visitor (a tombstone is skipped).
func (it *ovIter) emit(x item) bool {
	if x.val == nil {
		return true
	}
	if !it.fn(x.key, x.val) {
		it.stopped = true
		return false
	}
	return true
}

// buffersIn reports whether the overlay holds an item (a write or a
// tombstone) in a scan's range.
func (o *Overlay) buffersIn(prefix, start []byte, reverse bool) bool {
	if o.items.Len() == 0 {
		return false
	}
	found := false
	walk(o.items, prefix, start, reverse, func(item) bool {
		found = true
		return false
	})
	return found
}

// iter returns a merge iterator from the overlay's spares (a writer's
// scans run one after another, each used to allocate ~1 KB).
func (o *Overlay) iter() *ovIter {
	if n := len(o.spareIters); n > 0 {
		it := o.spareIters[n-1]
		o.spareIters = o.spareIters[:n-1]
		return it
	}
	it := &ovIter{o: o}
	it.buf = it.arr[:0]
	return it
}

func (o *Overlay) putIter(it *ovIter) {
	clear(it.arr[:])
	*it = ovIter{o: o, mergeFn: it.mergeFn}
	it.buf = it.arr[:0]
	o.spareIters = append(o.spareIters, it)
}

// ovIter pulls an overlay's items in scan order, a chunk at a time.
type ovIter struct {
	o       *Overlay
	prefix  []byte
	start   []byte
	reverse bool
	arr     [ovChunk]item // buf's first backing array
	buf     []item
	pos     int
	last    []byte // key of the last item fetched; the next chunk follows it
	done    bool
	// The merge's visitor and whether it stopped; mergeFn is it.merge, made
	// once per iterator (closures per scan were ~7 allocations per job).
	fn      func(k, v []byte) bool
	stopped bool
	mergeFn func(k, v []byte) bool
}

const ovChunk = 16

func (it *ovIter) peek() (item, bool) {
	if it.pos >= len(it.buf) && !it.done {
		it.fill()
	}
	if it.pos >= len(it.buf) {
		return item{}, false
	}
	return it.buf[it.pos], true
}

func (it *ovIter) pop() { it.pos++ }

func (it *ovIter) fill() {
	it.buf, it.pos = it.buf[:0], 0
	start := it.start
	if it.last != nil {
		start = it.last
	}
	walk(it.o.items, it.prefix, start, it.reverse, func(x item) bool {
		if it.last != nil && bytes.Equal(x.key, it.last) {
			return true // already returned by the previous chunk
		}
		it.buf = append(it.buf, x)
		return len(it.buf) < ovChunk
	})
	if len(it.buf) < ovChunk {
		it.done = true
	}
	if len(it.buf) > 0 {
		it.last = it.buf[len(it.buf)-1].key
	}
}

// Writes returns the buffered mutations in key order, for Store.Commit.
func (o *Overlay) Writes() []Write { return o.AppendWrites(make([]Write, 0, o.items.Len())) }

// AppendWrites is Writes appended to dst (a writer's buffer for its
// commits: a store does not keep the slices it is given).
func (o *Overlay) AppendWrites(dst []Write) []Write {
	o.items.Ascend(func(it item) bool {
		dst = append(dst, Write{Key: it.key, Val: it.val})
		return true
	})
	return dst
}

// MayHavePrefix implements PrefixProber: one B-tree seek here and one in a
// base that can tell, instead of a merged scan (a writer may ask it for a
// prefix that almost never holds keys before every scan of it).
func (o *Overlay) MayHavePrefix(prefix []byte) bool {
	if firstWithPrefix(o.items, prefix) {
		return true // a write or a tombstone: let Scan decide
	}
	if p, ok := o.base.(PrefixProber); ok {
		return p.MayHavePrefix(prefix)
	}
	return true
}

// Pool keeps what committed overlays used, their B-tree nodes (a free
// list) and their journal, for the next overlays a writer opens: a
// writer that opens overlays batch after batch allocates them once. It
// is not safe for concurrent use; bounds let an outsized batch's memory
// go to the collector.
type Pool struct {
	free *btree.FreeListG[item]
	undo []undoRec
}

const (
	poolFreeNodes = 256
	poolMaxUndo   = 16 << 10
)

// NewPool returns an empty pool.
func NewPool() *Pool { return &Pool{free: btree.NewFreeListG[item](poolFreeNodes)} }

// Overlay returns an empty write buffer over base built from the pool's
// nodes and journal.
func (p *Pool) Overlay(base Reader) *Overlay {
	o := &Overlay{base: base, items: btree.NewWithFreeListG(16, itemLess, p.free)}
	o.undo, p.undo = p.undo[:0], nil
	return o
}

// Recycle takes back the buffers of overlays whose writes are committed;
// they must not be used again.
func (p *Pool) Recycle(os ...*Overlay) {
	for _, o := range os {
		o.items.Clear(true)
		if cap(o.undo) > cap(p.undo) && cap(o.undo) <= poolMaxUndo {
			clear(o.undo[:cap(o.undo)])
			p.undo = o.undo[:0]
		}
	}
}
