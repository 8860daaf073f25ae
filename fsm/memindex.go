package fsm

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/flowd/flowd/fsm/store"
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
	inner store.Store
	mu    sync.Mutex
	mem   *mirror
	// snap is a read-only clone of mem shared by every view taken since
	// the last commit (Tree.Clone itself is not safe for concurrent use).
	snap *mirror
	// recent holds the run and task records the last commits wrote, for the
	// applier only (see ApplyView).
	recent recentCache
	// labels is the label index, apart and built in the background
	// (labelmirror.go).
	labels labelMirror
	// runs filters the applier's reads of run ids no run has (runfilter.go).
	runs *runFilter
	// durable and keep are Commit's buffers for the writes it passes on.
	durable [][]store.Write
	keep    []store.Write
}

// hotPrefixes are mirrored in memory.
// The label index (rl/) is mirrored too, in its own tree (labelmirror.go).
var hotPrefixes = [][]byte{pfxReady, pfxQueue, pfxLease, pfxWake, pfxBreaker, pfxPending, pfxRunState, pfxFinished, pfxClaimReq, pfxSchedule, pfxMeta}

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
func NewIndexedStore(inner store.Store) (*IndexedStore, error) {
	s := &IndexedStore{inner: inner}
	if err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *IndexedStore) reload() error {
	s.stopLabelBuild()
	mem := newMirror()
	r, release, err := s.inner.View()
	if err != nil {
		return err
	}
	var legacy []store.Write // derived keys a store written before they were derived still holds
	for _, p := range append(hotPrefixes[:len(hotPrefixes):len(hotPrefixes)], pfxLabel) {
		derived := isDerived(p)
		if err := r.Scan(p, nil, false, func(k, v []byte) bool {
			if derived {
				legacy = append(legacy, store.Write{Key: bytes.Clone(k)})
			} else {
				mem.Put(bytes.Clone(k), bytes.Clone(v))
			}
			return true
		}); err != nil {
			release()
			return err
		}
	}
	var labels []labelledRun // their keys are built in the background
	var ids []string
	err = deriveIndexesWith(r, func(k []byte) { mem.Put(k, []byte{}) },
		func(id string, l Labels) { labels = append(labels, labelledRun{id, l}) },
		func(id string) { ids = append(ids, id) })
	release()
	if err != nil {
		return fmt.Errorf("rebuild the ready, lease and wake-up indexes from the records: %w", err)
	}
	for len(legacy) > 0 {
		n := min(len(legacy), 10000)
		if err := s.inner.Commit([][]store.Write{legacy[:n]}); err != nil {
			return fmt.Errorf("drop the stored copies of the derived indexes: %w", err)
		}
		legacy = legacy[n:]
	}
	runs := newRunFilter(len(ids))
	for _, id := range ids {
		runs.add([]byte(id))
	}
	s.mu.Lock()
	s.mem, s.snap, s.runs = mem, nil, runs
	s.startLabelBuild(labels)
	s.mu.Unlock()
	s.recent.reset()
	return nil
}

// ApplyView is View for the FSM's applier: reads of run and task records
// are served from the values the last commits wrote when they are still
// cached, and the mirror is read in place, not through a snapshot. That is
// consistent only because the applier is the single writer: nothing
// commits between its view and its own commit, so the cache and the
// mirror hold exactly the durable store's values, and the mirror changes
// only in the applier's own Commit, after its reads. Other readers use
// View.
//
// Reading in place matters: a snapshot (a copy-on-write clone) makes the
// next commit copy every mirror node it writes on the path from the root,
// so a clone per entry cost each entry a few node copies per index key it
// wrote (BenchmarkFSMEntryOverhead: ~20 µs and 88 allocations per no-op
// entry before). Other readers still clone, at most once per commit.
func (s *IndexedStore) ApplyView() (Reader, func(), error) { return s.view(true) }

// View implements Store. The badger view and the mirror snapshot are taken
// under one lock, so a view never mixes two commits.
func (s *IndexedStore) View() (Reader, func(), error) { return s.view(false) }

// view takes the badger view and the mirror under one lock; forApply reads
// the mirror in place and the recent records (ApplyView), otherwise the
// shared snapshot of the mirror.
func (s *IndexedStore) view(forApply bool) (Reader, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	innerView := s.inner.View
	if av, ok := s.inner.(interface {
		ApplyView() (Reader, func(), error)
	}); ok && forApply {
		innerView = av.ApplyView // a write-behind window read in place
	}
	r, release, err := innerView()
	if err != nil {
		return nil, nil, err
	}
	ir := indexedReader{inner: r, labels: s.labelView()}
	if forApply {
		ir.mem, ir.recent, ir.runs = s.mem, &s.recent, s.runs
	} else {
		if s.snap == nil {
			s.snap = s.mem.Clone()
		}
		ir.mem = s.snap
	}
	return ir, release, nil
}

// Commit implements Store: the durable store first (without the derived
// indexes, which live in memory only), then the mirror.
func (s *IndexedStore) Commit(batches [][]store.Write) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	durable := s.durable[:0]
	keep := s.keep[:0] // every batch's durable writes, one after another
	for _, b := range batches {
		from := len(keep)
		for _, w := range b {
			if !isDerived(w.Key) {
				keep = append(keep, w)
			}
			if w.Val != nil && bytes.HasPrefix(w.Key, pfxRun) {
				s.runs.add(w.Key[len(pfxRun):]) // before the store holds it
			}
		}
		durable = append(durable, keep[from:len(keep):len(keep)])
	}
	err := s.inner.Commit(durable)
	// Reused by the next commit: the inner store keeps the keys and values
	// handed over, not the slices (Store.Commit).
	clear(keep)
	clear(durable)
	s.durable, s.keep = durable[:0], keep[:0]
	if err != nil {
		return err
	}
	s.snap = nil
	for _, b := range batches {
		for _, w := range b {
			if isQueryOnly(w.Key) {
				s.commitLabel(w)
				continue
			}
			if !isHot(w.Key) {
				if isRecord(w.Key) {
					s.recent.put(w.Key, w.Val)
				}
				continue
			}
			if w.Val == nil {
				s.mem.Delete(w.Key)
			} else {
				s.mem.Put(w.Key, w.Val) // handed over (Store.Commit)
			}
		}
	}
	return nil
}

// Replace implements Store. Derived index keys in the loaded state (a
// snapshot holds them) are not stored: reload rebuilds them from the
// records.
func (s *IndexedStore) Replace(load func(put func(k, v []byte) error) error) error {
	if err := s.inner.Replace(func(put func(k, v []byte) error) error {
		return load(func(k, v []byte) error {
			if isDerived(k) {
				return nil
			}
			return put(k, v)
		})
	}); err != nil {
		return err
	}
	return s.reload()
}

// TxnLimits reports the inner store's transaction limits (0, 0: none).
func (s *IndexedStore) TxnLimits() (bytes, writes int) {
	if tl, ok := s.inner.(store.TxnLimiter); ok {
		return tl.TxnLimits()
	}
	return 0, 0
}

// Sync implements Store.
func (s *IndexedStore) Sync() error { return s.inner.Sync() }

// Close implements Store.
func (s *IndexedStore) Close() error {
	s.stopLabelBuild()
	return s.inner.Close()
}

type indexedReader struct {
	inner  Reader
	mem    *mirror
	recent *recentCache // set in an ApplyView
	runs   *runFilter   // set in an ApplyView
	labels *store.Tree  // nil while the label index is being built
}

func (r indexedReader) Get(key []byte) ([]byte, bool, error) {
	if isQueryOnly(key) {
		if r.labels == nil {
			return nil, false, nil
		}
		return r.labels.Get(key)
	}
	if isHot(key) {
		return r.mem.Get(key)
	}
	if r.recent != nil {
		if v, found, ok := r.recent.get(key); ok {
			return v, found, nil
		}
	}
	// After the recent records: a run read back by its claim or completion
	// is found there without hashing its id.
	if r.runs != nil && bytes.HasPrefix(key, pfxRun) && !r.runs.mayHold(key[len(pfxRun):]) {
		return nil, false, nil
	}
	return r.inner.Get(key)
}

// isRecord: run and task records, read back by the next entries of the
// same runs (a submit's task by its claim, by its completion).
func isRecord(key []byte) bool {
	return bytes.HasPrefix(key, pfxRun) || bytes.HasPrefix(key, pfxTask) || bytes.HasPrefix(key, pfxSpec)
}

// recentCache keeps the last written values of record keys in two
// generations: when the current one reaches its bound it becomes the
// previous one and the oldest is dropped, so at most 2 × the bound is held
// and a lookup is two map reads. A deleted key is cached as absent.
type recentCache struct {
	mu        sync.Mutex
	cur, prev map[string][]byte
	curBytes  int
}

const (
	recentEntries = 32 << 10
	recentBytes   = 16 << 20
)

func (c *recentCache) reset() {
	c.mu.Lock()
	c.cur, c.prev, c.curBytes = nil, nil, 0
	c.mu.Unlock()
}

func (c *recentCache) put(key, val []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || len(c.cur) >= recentEntries || c.curBytes >= recentBytes {
		c.prev, c.cur, c.curBytes = c.cur, make(map[string][]byte, recentEntries), 0 // sized once: no growth while it fills
	}
	c.cur[ownedString(key)] = val // key and value handed over (Store.Commit): not copied
	c.curBytes += len(key) + len(val)
}

// get returns the cached value; ok is false when key is not cached.
func (c *recentCache) get(key []byte) (val []byte, found, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, hit := c.cur[string(key)]; hit {
		return v, v != nil, true
	}
	if v, hit := c.prev[string(key)]; hit {
		return v, v != nil, true
	}
	return nil, false, false
}

// Scan serves a hot prefix from memory. Any other scan reads the durable
// store, which holds the same values for the other hot keys as the mirror;
// a scan whose range covers derived indexes (a full scan: digest, snapshot)
// merges them in from memory, so it sees the same state as before they
// were derived (the query-only label index is left out: labelindex.go).
func (r indexedReader) Scan(prefix, start []byte, reverse bool, fn func(k, v []byte) bool) error {
	if len(prefix) >= len(pfxLabel) && isQueryOnly(prefix) {
		if r.labels == nil {
			return nil
		}
		return r.labels.Scan(prefix, start, reverse, fn)
	}
	if len(prefix) > 0 && isHot(prefix) {
		return r.mem.Scan(prefix, start, reverse, fn)
	}
	if !coversDerived(prefix) {
		return r.inner.Scan(prefix, start, reverse, fn)
	}
	var extra []store.Write // mirror keys and values are immutable: safe to hold
	_ = r.mem.Scan(prefix, start, reverse, func(k, v []byte) bool {
		if isDerived(k) && !isQueryOnly(k) {
			extra = append(extra, store.Write{Key: k, Val: v})
		}
		return true
	})
	return mergeScan(r.inner, prefix, start, reverse, extra, fn)
}

// coversDerived reports whether a scan of prefix can meet derived keys.
func coversDerived(prefix []byte) bool {
	for _, p := range derivedPrefixes {
		if bytes.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// MayHavePrefix implements store.PrefixProber: a hot prefix is answered by
// the mirror, any other may hold keys.
func (r indexedReader) MayHavePrefix(prefix []byte) bool {
	if len(prefix) >= len(pfxLabel) && isQueryOnly(prefix) {
		return r.labels == nil || r.labels.MayHavePrefix(prefix)
	}
	if len(prefix) > 0 && isHot(prefix) {
		return r.mem.MayHavePrefix(prefix)
	}
	return true
}

// MayHavePrefix implements store.PrefixProber: whether the store may hold
// keys under a hot prefix, from the mirror alone (no view taken): false is
// certain as of the last commit.
func (s *IndexedStore) MayHavePrefix(prefix []byte) bool {
	if len(prefix) == 0 || !isHot(prefix) {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mem.MayHavePrefix(prefix)
}
