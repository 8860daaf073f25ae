package store

import (
	"bytes"

	"github.com/google/btree"
)

// itemSource is an ordered set of buffered writes that a merged scan
// reads over a base view: an overlay's cells, or a write-behind window.
// Its methods take no callback: a closure passed through an interface
// escapes, one allocation per scan.
type itemSource interface {
	// holdsIn reports whether the source holds an item (a write or a
	// tombstone) in a scan's range.
	holdsIn(prefix, start []byte, reverse bool) bool
	// walkItems hands the items in a scan's range, in its order, to
	// it.take until it returns false.
	walkItems(prefix, start []byte, reverse bool, it *ovIter)
}

// merger merges an itemSource's writes into scans of a base view, keeping
// its iterators for the next scans (a writer's scans run one after
// another, each used to allocate ~1 KB).
type merger struct {
	spareIters []*ovIter
}

// scan merges src's writes with base's keys. The buffered side is read
// lazily, a few items at a time, so a scan that stops early (taking the
// head of a list) costs little however much src holds.
func (m *merger) scan(src itemSource, base Reader, prefix, start []byte, reverse bool, fn func(k, v []byte) bool) error {
	if !src.holdsIn(prefix, start, reverse) {
		// Nothing buffered in the range (the usual case for a scan of a
		// range the batch did not touch): the base alone, without the
		// merge's iterator and closures.
		return base.Scan(prefix, start, reverse, fn)
	}
	mine := m.iter(src)
	defer m.putIter(mine)
	mine.prefix, mine.start, mine.reverse, mine.fn = prefix, start, reverse, fn
	if mine.mergeFn == nil {
		mine.mergeFn = mine.merge
	}
	if err := base.Scan(prefix, start, reverse, mine.mergeFn); err != nil || mine.stopped {
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

// merge visits a base key for scan: the buffered items before it first,
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

// iter returns a merge iterator over src from the spares.
func (m *merger) iter(src itemSource) *ovIter {
	if n := len(m.spareIters); n > 0 {
		it := m.spareIters[n-1]
		m.spareIters = m.spareIters[:n-1]
		it.src = src
		return it
	}
	it := &ovIter{src: src}
	it.buf = it.arr[:0]
	return it
}

func (m *merger) putIter(it *ovIter) {
	clear(it.arr[:])
	*it = ovIter{mergeFn: it.mergeFn}
	it.buf = it.arr[:0]
	m.spareIters = append(m.spareIters, it)
}

// ovIter pulls a source's items in scan order, a chunk at a time.
type ovIter struct {
	src     itemSource
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

// take adds x to the chunk fill reads and reports whether the chunk has
// room for more.
func (it *ovIter) take(x item) bool {
	if it.last != nil && bytes.Equal(x.key, it.last) {
		return true // already returned by the previous chunk
	}
	it.buf = append(it.buf, x)
	return len(it.buf) < ovChunk
}

func (it *ovIter) fill() {
	it.buf, it.pos = it.buf[:0], 0
	start := it.start
	if it.last != nil {
		start = it.last
	}
	it.src.walkItems(it.prefix, start, it.reverse, it)
	if len(it.buf) < ovChunk {
		it.done = true
	}
	if len(it.buf) > 0 {
		it.last = it.buf[len(it.buf)-1].key
	}
}

// windowView reads a write-behind window (a B-tree of its writes, which
// the view does not change) over a view of the store under it.
type windowView struct {
	base  Reader
	items *btree.BTreeG[item]
	merger
}

// Get implements Reader: a write of the window, else the base.
func (v *windowView) Get(key []byte) ([]byte, bool, error) {
	if it, ok := v.items.Get(item{key: key}); ok {
		return it.val, it.val != nil, nil
	}
	return v.base.Get(key)
}

// Scan implements Reader (merger.scan).
func (v *windowView) Scan(prefix, start []byte, reverse bool, fn func(k, v []byte) bool) error {
	return v.scan(v, v.base, prefix, start, reverse, fn)
}

func (v *windowView) holdsIn(prefix, start []byte, reverse bool) bool {
	return anyInRange(v.items, itemKey, itemAt, prefix, start, reverse)
}

func (v *windowView) walkItems(prefix, start []byte, reverse bool, it *ovIter) {
	walk(v.items, prefix, start, reverse, it.take)
}

// MayHavePrefix implements PrefixProber (Overlay.MayHavePrefix).
func (v *windowView) MayHavePrefix(prefix []byte) bool {
	if firstWithPrefix(v.items, prefix) {
		return true
	}
	return baseMayHavePrefix(v.base, prefix)
}
