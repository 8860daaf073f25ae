package fsm

import (
	"bytes"

	"github.com/google/btree"
)

// Reader is a consistent read view of the state.
type Reader interface {
	// Get returns the value of key, or (nil, false). The slice must not be
	// modified and is valid only until the view is released.
	Get(key []byte) ([]byte, bool, error)
	// Scan visits keys with the given prefix in order (reverse: descending),
	// starting at start when it is non-nil (inclusive). fn returns false to
	// stop. k and v are valid only during the call.
	Scan(prefix, start []byte, reverse bool, fn func(k, v []byte) bool) error
}

// Tx is the narrow transaction Apply writes through.
type Tx interface {
	Reader
	Set(key, val []byte) error
	Delete(key []byte) error
}

// Store is the durable key/value state under the FSM. Only the FSM writes it
// (Commit and Replace); anyone may read through View.
type Store interface {
	// View returns a point-in-time reader; call release when done.
	View() (r Reader, release func(), err error)
	// Commit writes batches atomically, each batch in its own transaction,
	// in order. The FSM splits at entry boundaries so that the applied index
	// written in each batch always matches the state in it. A store may keep
	// the keys and values it is given (the indexed store's mirror and cache
	// do): the caller hands them over and never modifies them afterwards
	// (the FSM's write buffer owns every key and value it commits).
	Commit(batches [][]Write) error
	// Replace discards all state and loads the pairs produced by load.
	Replace(load func(put func(k, v []byte) error) error) error
	// Sync makes every committed write durable.
	Sync() error
	Close() error
}

// Write is one pending mutation; Delete when Val is nil.
type Write struct {
	Key []byte
	Val []byte
}

type item struct {
	key []byte
	val []byte // nil = tombstone
	// born: set in this overlay with the key known absent below it, so
	// deleting it needs no tombstone.
	born bool
}

func itemLess(a, b item) bool { return bytes.Compare(a.key, b.key) < 0 }

// overlay is an ordered write buffer over a Reader: reads see the buffered
// writes first. One overlay holds a batch's writes; a child overlay holds one
// entry's writes so a rejected entry can be dropped without a trace.
type overlay struct {
	base  Reader
	items *btree.BTreeG[item]
	size  int

	// Entry journal: while journaling, every change records what it
	// replaced, so a rejected entry's changes can be undone in place (no
	// write buffer of its own to build and merge).
	journaling bool
	undo       []undoRec
	entrySize  int

	spareIters []*ovIter // see iter
}

type undoRec struct {
	prev item // the replaced item; prev.key == nil if there was none
	key  []byte
}

func newOverlay(base Reader) *overlay {
	return &overlay{base: base, items: btree.NewG(16, itemLess)}
}

func (o *overlay) Get(key []byte) ([]byte, bool, error) {
	if it, ok := o.items.Get(item{key: key}); ok {
		return it.val, it.val != nil, nil
	}
	return o.base.Get(key)
}

func (o *overlay) Set(key, val []byte) error {
	if val == nil {
		val = []byte{}
	}
	o.put(item{key: bytes.Clone(key), val: val}, len(key)+len(val)+16)
	return nil
}

// SetNew is Set for a key the caller knows is absent below this overlay
// (e.g. an index key of a run created in this entry): if it is deleted
// again before the overlay is written, it leaves nothing, not a tombstone.
// setOwned is Set for a key the caller hands over (built for this write
// and not used after it): no copy.
func (o *overlay) setOwned(key, val []byte) {
	if val == nil {
		val = []byte{}
	}
	o.put(item{key: key, val: val}, len(key)+len(val)+16)
}

func (o *overlay) SetNew(key, val []byte) error {
	o.setNewOwned(bytes.Clone(key), val)
	return nil
}

// setNewOwned is SetNew for a key the caller hands over (see setOwned).
func (o *overlay) setNewOwned(key, val []byte) {
	if val == nil {
		val = []byte{}
	}
	o.put(item{key: key, val: val, born: true}, len(key)+len(val)+16)
}

func (o *overlay) Delete(key []byte) error {
	if o.dropBorn(key) {
		return nil
	}
	o.put(item{key: bytes.Clone(key)}, len(key)+16)
	return nil
}

// deleteOwned is Delete for a key the caller hands over (see setOwned).
func (o *overlay) deleteOwned(key []byte) {
	if !o.dropBorn(key) {
		o.put(item{key: key}, len(key)+16)
	}
}

// dropBorn removes key if it was born in this overlay (absent below: no
// tombstone needed) and reports whether it did.
func (o *overlay) dropBorn(key []byte) bool {
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

func (o *overlay) put(it item, n int) {
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

// begin starts journaling an entry's changes.
func (o *overlay) begin() {
	o.journaling, o.undo, o.entrySize = true, o.undo[:0], 0
}

// end stops journaling, keeping the entry's changes.
func (o *overlay) end() {
	o.journaling, o.undo = false, o.undo[:0]
}

// rollback undoes the entry's changes, newest first.
func (o *overlay) rollback() {
	o.rollbackTo(savepoint{})
	o.end()
}

// savepoint marks a point in the entry's journal (a Multi sub-command).
type savepoint struct{ undo, size int }

func (o *overlay) mark() savepoint { return savepoint{len(o.undo), o.entrySize} }

// rollbackTo undoes the changes made since sp, newest first.
func (o *overlay) rollbackTo(sp savepoint) {
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

// Scan merges the buffered writes with the base view. The buffered side is
// read lazily, a few items at a time, so a scan that stops early (a claim
// taking the head of a list) costs little however much the batch wrote.
func (o *overlay) Scan(prefix, start []byte, reverse bool, fn func(k, v []byte) bool) error {
	if !o.buffersIn(prefix, start, reverse) {
		// Nothing buffered in the range (the usual case for the index
		// scans of a claim): the base alone, without the merge's iterator
		// and closures.
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
func (o *overlay) buffersIn(prefix, start []byte, reverse bool) bool {
	if o.items.Len() == 0 {
		return false
	}
	found := false
	o.walk(prefix, start, reverse, func(item) bool {
		found = true
		return false
	})
	return found
}

// iter returns a merge iterator from the overlay's spares (a claim's
// scans run one after another, each used to allocate ~1 KB).
func (o *overlay) iter() *ovIter {
	if n := len(o.spareIters); n > 0 {
		it := o.spareIters[n-1]
		o.spareIters = o.spareIters[:n-1]
		return it
	}
	it := &ovIter{o: o}
	it.buf = it.arr[:0]
	return it
}

func (o *overlay) putIter(it *ovIter) {
	clear(it.arr[:])
	*it = ovIter{o: o, mergeFn: it.mergeFn}
	it.buf = it.arr[:0]
	o.spareIters = append(o.spareIters, it)
}

// ovIter pulls an overlay's items in scan order, a chunk at a time.
type ovIter struct {
	o       *overlay
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
	it.o.walk(it.prefix, start, it.reverse, func(x item) bool {
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

// walk visits the buffered items in the scan's range and order until fn
// returns false.
func (o *overlay) walk(prefix, start []byte, reverse bool, fn func(item) bool) {
	if !reverse {
		from := prefix
		if start != nil && bytes.Compare(start, prefix) > 0 {
			from = start
		}
		o.items.AscendGreaterOrEqual(item{key: from}, func(it item) bool {
			return bytes.HasPrefix(it.key, prefix) && fn(it)
		})
		return
	}
	visit := func(it item) bool {
		if !bytes.HasPrefix(it.key, prefix) {
			// Above the prefix range: keep descending; below it: done.
			return bytes.Compare(it.key, prefix) > 0
		}
		return fn(it)
	}
	switch end := prefixEnd(prefix); {
	case start != nil:
		o.items.DescendLessOrEqual(item{key: start}, visit)
	case end != nil:
		o.items.DescendLessOrEqual(item{key: end}, visit)
	default:
		o.items.Descend(visit)
	}
}

// writes returns the buffered mutations in key order.
func (o *overlay) writes() []Write {
	out := make([]Write, 0, o.items.Len())
	o.items.Ascend(func(it item) bool {
		out = append(out, Write{Key: it.key, Val: it.val})
		return true
	})
	return out
}

// prefixEnd returns the smallest key greater than every key with prefix, or
// nil when there is none.
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// prefixProber is an optional Reader method: whether any key may start
// with prefix. false is certain; true may be wrong (a reader that cannot
// tell cheaply says true).
type prefixProber interface {
	mayHavePrefix(prefix []byte) bool
}

// mayHavePrefix reports whether a Scan of prefix could find anything: one
// B-tree seek here and one in a base that can tell, instead of a merged
// scan (the applier asks this for every claim's request id, which almost
// never has leases).
func (o *overlay) mayHavePrefix(prefix []byte) bool {
	if firstWithPrefix(o.items, prefix) {
		return true // a write or a tombstone: let Scan decide
	}
	if p, ok := o.base.(prefixProber); ok {
		return p.mayHavePrefix(prefix)
	}
	return true
}

// firstWithPrefix reports whether t holds a key starting with prefix.
func firstWithPrefix(t *btree.BTreeG[item], prefix []byte) bool {
	found := false
	t.AscendGreaterOrEqual(item{key: prefix}, func(it item) bool {
		found = bytes.HasPrefix(it.key, prefix)
		return false
	})
	return found
}
