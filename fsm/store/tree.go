package store

import (
	"bytes"

	"github.com/google/btree"
)

// item is one key in a B-tree of the package: an overlay's write or
// tombstone, or a Tree's pair.
type item struct {
	key []byte
	val []byte // nil = tombstone
	// born: set in this overlay with the key known absent below it, so
	// deleting it needs no tombstone.
	born bool
}

func itemLess(a, b item) bool { return bytes.Compare(a.key, b.key) < 0 }

// Tree is an ordered in-memory map of keys to values that reads as a
// Reader (and a PrefixProber), for state kept in memory beside a durable
// store (an index mirror). Put keeps the key and value it is given. A Tree
// is not safe for concurrent use; Clone gives a copy-on-write snapshot that
// readers may share while the original goes on changing.
//
// A *Tree is the B-tree itself (a defined type, not a wrapper), so a clone
// or a view of one allocates nothing beyond the B-tree's own.
type Tree btree.BTreeG[item]

func (t *Tree) bt() *btree.BTreeG[item] { return (*btree.BTreeG[item])(t) }

// NewTree returns an empty tree.
func NewTree() *Tree { return (*Tree)(btree.NewG(8, itemLess)) }

// Put sets key to val (nil: empty), keeping both: the caller hands them over.
func (t *Tree) Put(key, val []byte) {
	if val == nil {
		val = []byte{}
	}
	t.bt().ReplaceOrInsert(item{key: key, val: val})
}

// Delete removes key.
func (t *Tree) Delete(key []byte) { t.bt().Delete(item{key: key}) }

// Len is the number of keys.
func (t *Tree) Len() int { return t.bt().Len() }

// Clone returns a copy-on-write snapshot of t. Clone must not run
// concurrently with anything else on t; the snapshot may then be read
// while t changes.
func (t *Tree) Clone() *Tree { return (*Tree)(t.bt().Clone()) }

// Get implements Reader.
func (t *Tree) Get(key []byte) ([]byte, bool, error) {
	it, ok := t.bt().Get(item{key: key})
	return it.val, ok, nil
}

// Scan implements Reader.
func (t *Tree) Scan(prefix, start []byte, reverse bool, fn func(k, v []byte) bool) error {
	walk(t.bt(), prefix, start, reverse, func(it item) bool { return fn(it.key, it.val) })
	return nil
}

// MayHavePrefix implements PrefixProber; the answer is exact.
func (t *Tree) MayHavePrefix(prefix []byte) bool { return firstWithPrefix(t.bt(), prefix) }

// walk visits t's items in a scan's range and order until fn returns false.
func walk(t *btree.BTreeG[item], prefix, start []byte, reverse bool, fn func(item) bool) {
	walkTree(t, itemKey, itemAt, prefix, start, reverse, fn)
}

func itemKey(it item) []byte { return it.key }
func itemAt(k []byte) item   { return item{key: k} }

// walkTree is walk for a B-tree of any element: key reads an element's
// key, at makes the pivot element for a key (an overlay's tree holds
// pointers to its writes).
func walkTree[T any](t *btree.BTreeG[T], key func(T) []byte, at func([]byte) T, prefix, start []byte, reverse bool, fn func(T) bool) {
	if !reverse {
		from := prefix
		if start != nil && bytes.Compare(start, prefix) > 0 {
			from = start
		}
		t.AscendGreaterOrEqual(at(from), func(it T) bool {
			return bytes.HasPrefix(key(it), prefix) && fn(it)
		})
		return
	}
	visit := func(it T) bool {
		k := key(it)
		if !bytes.HasPrefix(k, prefix) {
			// Above the prefix range: keep descending; below it: done.
			return bytes.Compare(k, prefix) > 0
		}
		return fn(it)
	}
	switch end := PrefixEnd(prefix); {
	case start != nil:
		t.DescendLessOrEqual(at(start), visit)
	case end != nil:
		t.DescendLessOrEqual(at(end), visit)
	default:
		t.Descend(visit)
	}
}

// firstWithPrefix reports whether t holds a key starting with prefix.
func firstWithPrefix(t *btree.BTreeG[item], prefix []byte) bool {
	return anyInRange(t, itemKey, itemAt, prefix, nil, false)
}

// anyInRange reports whether t holds an element in a scan's range (walkTree):
// one seek, the first element it finds decides.
func anyInRange[T any](t *btree.BTreeG[T], key func(T) []byte, at func([]byte) T, prefix, start []byte, reverse bool) bool {
	found := false
	walkTree(t, key, at, prefix, start, reverse, func(T) bool {
		found = true
		return false
	})
	return found
}

// PrefixEnd returns the smallest key greater than every key with prefix,
// or nil when there is none (prefix is empty or all 0xff).
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
