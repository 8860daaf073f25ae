package fsm

import (
	"bytes"
	"sync"

	"github.com/google/btree"
)

// IndexedStore keeps the hot index prefixes of another Store mirrored in
// memory. The ready index, leases, wake-ups, queue and breaker records and
// the meta keys are rewritten by nearly every entry; in badger each
// rewrite leaves a tombstone that later seeks must skip until compaction, so
// claim and reap scans slow down under load. Serving those prefixes from an
// in-memory B-tree (loaded once at open, updated on every commit) keeps
// them O(log n) while badger stays the durable copy.
//
// Views are consistent: a view pins a copy-on-write clone of the mirror
// taken together with the inner store's view.
type IndexedStore struct {
	inner Store
	mu    sync.Mutex
	mem   *btree.BTreeG[item]
	// snap is a read-only clone of mem shared by every view taken since
	// the last commit (btree.Clone itself is not safe for concurrent use).
	snap *btree.BTreeG[item]
}

// hotPrefixes are mirrored in memory.
var hotPrefixes = [][]byte{pfxReady, pfxQueue, pfxLease, pfxWake, pfxBreaker, pfxPending, []byte("m/")}

// isHot reports whether key (or every key under a scan prefix) lies in a
// hot prefix.
func isHot(key []byte) bool {
	for _, p := range hotPrefixes {
		if bytes.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// NewIndexedStore wraps inner, loading the hot prefixes into memory.
func NewIndexedStore(inner Store) (*IndexedStore, error) {
	s := &IndexedStore{inner: inner}
	if err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *IndexedStore) reload() error {
	mem := btree.NewG(8, itemLess)
	r, release, err := s.inner.View()
	if err != nil {
		return err
	}
	defer release()
	for _, p := range hotPrefixes {
		if err := r.Scan(p, nil, false, func(k, v []byte) bool {
			mem.ReplaceOrInsert(item{key: bytes.Clone(k), val: bytes.Clone(v)})
			return true
		}); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.mem, s.snap = mem, nil
	s.mu.Unlock()
	return nil
}

// View implements Store. The badger view and the mirror snapshot are taken
// under one lock, so a view never mixes two commits.
func (s *IndexedStore) View() (Reader, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, release, err := s.inner.View()
	if err != nil {
		return nil, nil, err
	}
	if s.snap == nil {
		s.snap = s.mem.Clone()
	}
	return indexedReader{inner: r, mem: memReader{s.snap}}, release, nil
}

// Commit implements Store: the durable store first, then the mirror.
func (s *IndexedStore) Commit(batches [][]Write) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.inner.Commit(batches); err != nil {
		return err
	}
	s.snap = nil
	for _, b := range batches {
		for _, w := range b {
			if !isHot(w.Key) {
				continue
			}
			if w.Val == nil {
				s.mem.Delete(item{key: w.Key})
			} else {
				s.mem.ReplaceOrInsert(item{key: bytes.Clone(w.Key), val: bytes.Clone(w.Val)})
			}
		}
	}
	return nil
}

// Replace implements Store.
func (s *IndexedStore) Replace(load func(put func(k, v []byte) error) error) error {
	if err := s.inner.Replace(load); err != nil {
		return err
	}
	return s.reload()
}

// Sync implements Store.
func (s *IndexedStore) Sync() error { return s.inner.Sync() }

// Close implements Store.
func (s *IndexedStore) Close() error { return s.inner.Close() }

type indexedReader struct {
	inner Reader
	mem   memReader
}

func (r indexedReader) Get(key []byte) ([]byte, bool, error) {
	if isHot(key) {
		return r.mem.Get(key)
	}
	return r.inner.Get(key)
}

// Scan serves a hot prefix from memory. Any other scan, including a full
// scan (digest, snapshot), reads the durable store, which holds the same
// values for hot keys as the mirror.
func (r indexedReader) Scan(prefix, start []byte, reverse bool, fn func(k, v []byte) bool) error {
	if len(prefix) > 0 && isHot(prefix) {
		return r.mem.Scan(prefix, start, reverse, fn)
	}
	return r.inner.Scan(prefix, start, reverse, fn)
}
