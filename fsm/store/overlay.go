package store

import (
	"bytes"
	"unsafe"

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
// Each buffered write is a cell held twice: by key in a map, for point
// reads and rewrites, and in key order in a B-tree of pointers, for scans
// and Writes. A job's commands write ~20 keys, about half of them rewrites
// of a key the same batch wrote; a rewrite changes its cell in place and a
// read is one hash lookup, where a B-tree of the writes themselves cost a
// search of byte comparisons for each and an insert that shifted 56-byte
// items (fsm/store/DESIGN.md, "The overlay's two indexes").
//
// Sizes count key + value + 16 bytes per write (TxnLimiter's unit). An
// Overlay is not safe for concurrent use.
type Overlay struct {
	base  Reader
	cells *btree.BTreeG[*item]
	index map[string]*item
	// Cells come a chunk at a time: slab is what is left of the chunk in
	// use, used the chunks handed out, spare the pool's chunks not yet
	// needed.
	slab        []item
	used, spare [][]item
	// pivot is the search key of the tree's walks (no allocation per
	// walk); walks never nest: their visitors only copy cells.
	pivot item
	size  int

	journaling bool
	undo       []undoRec
	entrySize  int

	merger
}

// undoRec is one change of a journaled unit: the cell it changed and the
// cell's contents before.
type undoRec struct {
	c    *item
	prev item
	op   undoOp
}

type undoOp uint8

const (
	undoChanged undoOp = iota // restore *c = prev
	undoCreated               // c was added: remove it
	undoDropped               // c was removed: put it back
)

// cellChunk is how many cells an overlay allocates at once.
const cellChunk = 64

// indexKey is a cell's key as the index's map key, sharing the cell's
// bytes: a buffered key is never changed (Set copies the caller's, the
// Owned forms take keys handed over), and the index is cleared before its
// cells are reused.
func indexKey(k []byte) string { return unsafe.String(unsafe.SliceData(k), len(k)) }

// NewOverlay returns an empty write buffer over base.
func NewOverlay(base Reader) *Overlay {
	return &Overlay{base: base, cells: btree.NewG(16, cellLess), index: map[string]*item{}}
}

func cellLess(a, b *item) bool { return bytes.Compare(a.key, b.key) < 0 }
func cellKey(c *item) []byte   { return c.key }

// at is the pivot of a walk from k.
func (o *Overlay) at(k []byte) *item {
	o.pivot.key = k
	return &o.pivot
}

// Get implements Reader: a buffered write, else the base.
func (o *Overlay) Get(key []byte) ([]byte, bool, error) {
	if c, ok := o.index[string(key)]; ok {
		return c.val, c.val != nil, nil
	}
	return o.base.Get(key)
}

// Set implements Tx; key is copied, val is kept.
func (o *Overlay) Set(key, val []byte) error {
	if val == nil {
		val = []byte{}
	}
	if c, ok := o.index[string(key)]; ok {
		o.change(c, val, false, len(key)+len(val)+16)
		return nil
	}
	o.create(item{key: bytes.Clone(key), val: val}, len(key)+len(val)+16)
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
	if c, ok := o.index[string(key)]; ok {
		o.deleteCell(c, len(key)+16)
		return nil
	}
	o.create(item{key: bytes.Clone(key)}, len(key)+16)
	return nil
}

// DeleteOwned is Delete for a key the caller hands over (see SetOwned).
func (o *Overlay) DeleteOwned(key []byte) {
	if c, ok := o.index[string(key)]; ok {
		o.deleteCell(c, len(key)+16)
		return
	}
	o.create(item{key: key}, len(key)+16)
}

// deleteCell deletes a buffered key: a key born in this overlay (absent
// below) is dropped, anything else becomes a tombstone.
func (o *Overlay) deleteCell(c *item, n int) {
	if !c.born {
		o.change(c, nil, false, n)
		return
	}
	o.cells.Delete(c)
	delete(o.index, string(c.key))
	if o.journaling {
		o.undo = append(o.undo, undoRec{c: c, op: undoDropped})
	}
}

// put buffers it: a rewrite of its cell, or a new cell.
func (o *Overlay) put(it item, n int) {
	if c, ok := o.index[string(it.key)]; ok {
		o.change(c, it.val, it.born, n)
		return
	}
	o.create(it, n)
}

// change rewrites c's value. A key overwritten while still absent below
// (born) stays born unless the write is a tombstone.
func (o *Overlay) change(c *item, val []byte, born bool, n int) {
	if o.journaling {
		o.undo = append(o.undo, undoRec{c: c, prev: *c, op: undoChanged})
		o.entrySize += n
	}
	c.born = born || (c.born && val != nil)
	c.val = val
	o.size += n
}

// create adds a cell for a key the overlay does not hold.
func (o *Overlay) create(it item, n int) {
	if len(o.slab) == 0 {
		if n := len(o.spare); n > 0 {
			o.slab, o.spare = o.spare[n-1], o.spare[:n-1]
		} else {
			o.slab = make([]item, cellChunk)
		}
		o.used = append(o.used, o.slab)
	}
	c := &o.slab[0]
	o.slab = o.slab[1:]
	*c = it
	o.cells.ReplaceOrInsert(c)
	o.index[indexKey(c.key)] = c
	o.size += n
	if o.journaling {
		o.undo = append(o.undo, undoRec{c: c, op: undoCreated})
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
		switch u.op {
		case undoChanged:
			*u.c = u.prev
		case undoCreated:
			o.cells.Delete(u.c)
			delete(o.index, string(u.c.key))
		case undoDropped:
			o.cells.ReplaceOrInsert(u.c)
			o.index[indexKey(u.c.key)] = u.c
		}
	}
	clear(o.undo[sp.undo:])
	o.undo = o.undo[:sp.undo]
	o.size -= o.entrySize - sp.size
	o.entrySize = sp.size
}

// Size is the bytes the overlay buffers, as TxnLimiter counts them.
func (o *Overlay) Size() int { return o.size }

// EntrySize is the bytes written since Begin.
func (o *Overlay) EntrySize() int { return o.entrySize }

// Len is the number of buffered writes (tombstones included).
func (o *Overlay) Len() int { return o.cells.Len() }

// Scan implements Reader, merging the buffered writes with the base view
// (merger.scan).
func (o *Overlay) Scan(prefix, start []byte, reverse bool, fn func(k, v []byte) bool) error {
	return o.scan(o, o.base, prefix, start, reverse, fn)
}

// holdsIn implements itemSource.
func (o *Overlay) holdsIn(prefix, start []byte, reverse bool) bool {
	return anyInRange(o.cells, cellKey, o.at, prefix, start, reverse)
}

// walkItems implements itemSource: the buffered writes in a scan's range,
// copied out of their cells.
func (o *Overlay) walkItems(prefix, start []byte, reverse bool, it *ovIter) {
	walkTree(o.cells, cellKey, o.at, prefix, start, reverse, func(c *item) bool { return it.take(*c) })
}

// Writes returns the buffered mutations in key order, for Store.Commit.
func (o *Overlay) Writes() []Write { return o.AppendWrites(make([]Write, 0, o.cells.Len())) }

// AppendWrites is Writes appended to dst (a writer's buffer for its
// commits: a store does not keep the slices it is given).
func (o *Overlay) AppendWrites(dst []Write) []Write {
	o.cells.Ascend(func(c *item) bool {
		dst = append(dst, Write{Key: c.key, Val: c.val})
		return true
	})
	return dst
}

// MayHavePrefix implements PrefixProber: one B-tree seek here and one in a
// base that can tell, instead of a merged scan (a writer may ask it for a
// prefix that almost never holds keys before every scan of it).
func (o *Overlay) MayHavePrefix(prefix []byte) bool {
	if anyInRange(o.cells, cellKey, o.at, prefix, nil, false) {
		return true // a write or a tombstone: let Scan decide
	}
	return baseMayHavePrefix(o.base, prefix)
}

// baseMayHavePrefix asks base whether it may hold keys under prefix: yes
// unless it can tell.
func baseMayHavePrefix(base Reader, prefix []byte) bool {
	if p, ok := base.(PrefixProber); ok {
		return p.MayHavePrefix(prefix)
	}
	return true
}

// Pool keeps what committed overlays used, their B-tree nodes (a free
// list), their key index and their journal, for the next overlays a
// writer opens: a writer that opens overlays batch after batch allocates
// them once. It is not safe for concurrent use; bounds let an outsized
// batch's memory go to the collector.
type Pool struct {
	free   *btree.FreeListG[*item]
	undo   []undoRec
	index  map[string]*item
	chunks [][]item
}

const (
	poolFreeNodes = 256
	poolMaxUndo   = 16 << 10
	poolMaxIndex  = 16 << 10
	poolMaxChunks = poolMaxIndex / cellChunk
)

// NewPool returns an empty pool.
func NewPool() *Pool { return &Pool{free: btree.NewFreeListG[*item](poolFreeNodes)} }

// Overlay returns an empty write buffer over base built from the pool's
// nodes, index and journal.
func (p *Pool) Overlay(base Reader) *Overlay {
	o := &Overlay{base: base, cells: btree.NewWithFreeListG(16, cellLess, p.free)}
	o.undo, p.undo = p.undo[:0], nil
	if o.index, p.index = p.index, nil; o.index == nil {
		o.index = map[string]*item{}
	}
	o.spare, p.chunks = p.chunks, nil
	return o
}

// Recycle takes back the buffers of overlays whose writes are committed;
// they must not be used again.
func (p *Pool) Recycle(os ...*Overlay) {
	for _, o := range os {
		o.cells.Clear(true)
		if cap(o.undo) > cap(p.undo) && cap(o.undo) <= poolMaxUndo {
			clear(o.undo[:cap(o.undo)])
			p.undo = o.undo[:0]
		}
		if p.index == nil && len(o.index) <= poolMaxIndex {
			clear(o.index)
			p.index = o.index
		}
		for _, c := range o.used {
			if len(p.chunks) < poolMaxChunks {
				clear(c)
				p.chunks = append(p.chunks, c)
			}
		}
		for _, c := range o.spare {
			if len(p.chunks) < poolMaxChunks {
				p.chunks = append(p.chunks, c)
			}
		}
		o.index, o.slab, o.used, o.spare = nil, nil, nil, nil
	}
}
