package fsm

import (
	"bytes"

	"github.com/flowd/flowd/fsm/store"
)

// mirror is IndexedStore's in-memory copy of the hot and derived prefixes,
// in two trees: the run indexes (runs by state and finished runs by time,
// rs/ and rf/), which hold two keys for every run the store retains, and
// everything else (the ready index, leases, claims, wake-ups, queue and
// breaker records, the meta keys), which holds about as many keys as there
// is work in flight. Nearly every entry puts and deletes in the second; in
// one tree each of those walked a tree as deep as the retained runs made it.
// It reads as one Reader: a scan whose prefix covers both trees (a full
// scan) merges them.
type mirror struct {
	hot, runs *store.Tree
}

func newMirror() *mirror { return &mirror{hot: store.NewTree(), runs: store.NewTree()} }

// runIndexed reports whether key (or every key under a scan prefix) is in
// the run indexes' tree.
func runIndexed(key []byte) bool {
	return bytes.HasPrefix(key, pfxRunState) || bytes.HasPrefix(key, pfxFinished)
}

// coversRunIndexes reports whether a scan of prefix can meet keys of the
// run indexes' tree without lying inside it (a shorter prefix: "", "r").
func coversRunIndexes(prefix []byte) bool {
	return bytes.HasPrefix(pfxRunState, prefix) || bytes.HasPrefix(pfxFinished, prefix)
}

func (m *mirror) tree(key []byte) *store.Tree {
	if runIndexed(key) {
		return m.runs
	}
	return m.hot
}

// Put sets key to val, keeping both (Tree.Put).
func (m *mirror) Put(key, val []byte) { m.tree(key).Put(key, val) }

// Delete removes key.
func (m *mirror) Delete(key []byte) { m.tree(key).Delete(key) }

// Clone returns a copy-on-write snapshot of both trees (Tree.Clone).
func (m *mirror) Clone() *mirror { return &mirror{hot: m.hot.Clone(), runs: m.runs.Clone()} }

// Get implements Reader.
func (m *mirror) Get(key []byte) ([]byte, bool, error) { return m.tree(key).Get(key) }

// MayHavePrefix implements store.PrefixProber; the answer is exact.
func (m *mirror) MayHavePrefix(prefix []byte) bool {
	switch {
	case runIndexed(prefix):
		return m.runs.MayHavePrefix(prefix)
	case coversRunIndexes(prefix):
		return m.hot.MayHavePrefix(prefix) || m.runs.MayHavePrefix(prefix)
	}
	return m.hot.MayHavePrefix(prefix)
}

// Scan implements Reader: one tree, or both merged in the scan's order.
func (m *mirror) Scan(prefix, start []byte, reverse bool, fn func(k, v []byte) bool) error {
	switch {
	case runIndexed(prefix):
		return m.runs.Scan(prefix, start, reverse, fn)
	case !coversRunIndexes(prefix):
		return m.hot.Scan(prefix, start, reverse, fn)
	}
	// The two key ranges interleave (rp/ lies between rf/ and rs/): take
	// the run indexes' keys in order, then walk the other tree and let
	// each of its keys go after those that come before it.
	var runs []store.Write // mirror keys and values are immutable: safe to hold
	_ = m.runs.Scan(prefix, start, reverse, func(k, v []byte) bool {
		runs = append(runs, store.Write{Key: k, Val: v})
		return true
	})
	return mergeScan(m.hot, prefix, start, reverse, runs, fn)
}

// mergeScan scans r and visits, in the scan's order, its pairs and those of
// extra (already in that order, none also in r).
func mergeScan(r store.Reader, prefix, start []byte, reverse bool, extra []store.Write, fn func(k, v []byte) bool) error {
	i, stopped := 0, false
	err := r.Scan(prefix, start, reverse, func(k, v []byte) bool {
		for ; i < len(extra) && scanBefore(extra[i].Key, k, reverse); i++ {
			if !fn(extra[i].Key, extra[i].Val) {
				stopped = true
				return false
			}
		}
		if !fn(k, v) {
			stopped = true
			return false
		}
		return true
	})
	for ; err == nil && !stopped && i < len(extra); i++ {
		if !fn(extra[i].Key, extra[i].Val) {
			break
		}
	}
	return err
}

// scanBefore reports whether a comes before b in a scan's order.
func scanBefore(a, b []byte, reverse bool) bool {
	if reverse {
		return bytes.Compare(a, b) > 0
	}
	return bytes.Compare(a, b) < 0
}
