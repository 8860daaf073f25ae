package store

import (
	"fmt"
	"sync"
	"time"

	"github.com/google/btree"
)

// WriteBehind is a Store that keeps the last commits in memory and writes
// them to the store under it together, as one transaction per window, the
// way etcd's backend batches its bbolt transactions. Within a window a key
// written many times reaches the store once: a queued job's task record is
// written when it is submitted, claimed and completed, usually within a few
// milliseconds of each other, and its run record as often; the meta keys
// every entry rewrites (the applied index, the clock) are written once per
// window instead of once per entry.
//
// What it keeps is what the layer above needs:
//
//   - Views see every commit at once: a view reads the pending writes (a
//     copy-on-write clone shared by the views taken between two commits)
//     over a view of the store under it, both taken under one lock, so a
//     view never mixes two windows.
//   - Each window is one atomic transaction that holds everything committed
//     before it, the writer's progress record included (fsm's applied
//     index), so after a crash the store under it holds a consistent
//     prefix of the commits, as before, only an older one: the writer
//     replays the rest from its log.
//   - Sync writes the window out before it syncs, so whatever must be
//     durable (a raft snapshot's state before raft compacts its log) is.
//   - A window never holds more than the store under it takes in one
//     transaction (TxnLimiter): it is written out before a commit would
//     take it past that.
//
// A window ends when it is maxAge old at the next commit, when it would
// grow past the transaction limit, on Sync and Close, and, on an idle
// writer, when a one-shot timer armed by its first write fires.
type WriteBehind struct {
	inner Store
	// maxAge bounds how long a commit waits in memory; maxBytes and
	// maxWrites bound a window (the inner store's transaction limits).
	maxAge              time.Duration
	maxBytes, maxWrites int

	mu      sync.Mutex
	pending *btree.BTreeG[item] // val nil: a delete
	// snap is a read-only clone of pending shared by every view taken since
	// the last commit (a clone is not safe to take concurrently).
	snap   *btree.BTreeG[item]
	size   int       // bytes of pending, as TxnLimits counts them
	since  time.Time // when the window's first write came
	timer  *time.Timer
	failed error // the first error writing a window; fails every later call
	closed bool

	// applyView is the reader ApplyView hands the single writer, reused
	// (its scan iterators with it).
	applyView *windowView
	// applyInner is the view of the store under it that ApplyView hands
	// the writer, kept from one ApplyView to the next until the next
	// window is written (nothing else changes that store), so an entry
	// does not open and close a read transaction of its own.
	applyInner *sharedView
}

// sharedView is a view of the store under a WriteBehind, released once it
// is no longer the kept one (a window was written since) and no reader
// holds it.
type sharedView struct {
	r       Reader
	release func()
	refs    int
}

// dropApplyInner stops keeping the writer's inner view (w.mu held).
func (w *WriteBehind) dropApplyInner() {
	if sv := w.applyInner; sv != nil {
		w.applyInner = nil
		if sv.refs == 0 {
			sv.release()
		}
	}
}

// DefaultWriteBehindAge is how long commits wait in memory at most before
// they are written to the store under a WriteBehind.
const DefaultWriteBehindAge = 100 * time.Millisecond

// NewWriteBehind returns a WriteBehind over inner whose windows last at most
// maxAge (0: DefaultWriteBehindAge).
func NewWriteBehind(inner Store, maxAge time.Duration) *WriteBehind {
	if maxAge <= 0 {
		maxAge = DefaultWriteBehindAge
	}
	w := &WriteBehind{inner: inner, maxAge: maxAge, pending: newPending(), maxBytes: txnBudgetBytes, maxWrites: txnBudgetWrites}
	if tl, ok := inner.(TxnLimiter); ok {
		if b, n := tl.TxnLimits(); b > 0 && n > 0 {
			w.maxBytes, w.maxWrites = b, n
		}
	}
	return w
}

// Without a limit from the store under it, a window is bounded anyway: its
// memory, and the size of the transaction it becomes.
const (
	txnBudgetBytes  = 8 << 20
	txnBudgetWrites = 100_000
)

func newPending() *btree.BTreeG[item] { return btree.NewG(16, itemLess) }

func writeSize(w Write) int { return len(w.Key) + len(w.Val) + 16 }

// TxnLimits implements TxnLimiter: the store under it's limits (a writer's
// transaction must still fit one of its transactions).
func (w *WriteBehind) TxnLimits() (bytes, writes int) { return w.maxBytes, w.maxWrites }

// View implements Store.
func (w *WriteBehind) View() (Reader, func(), error) { return w.view(false) }

// ApplyView is View for the store's single writer: the pending writes are
// read in place, not through a clone. That is consistent because only the
// writer changes them, in its own Commit, after its reads; a window the
// timer writes out meanwhile is replaced, not changed, so the reader goes
// on reading the window and the inner view it was taken with. It must not
// be used by anyone else, nor after the writer's next ApplyView.
func (w *WriteBehind) ApplyView() (Reader, func(), error) { return w.view(true) }

// view takes the inner view and the window under one lock: the window in
// place (inPlace, for the writer) or the shared clone.
func (w *WriteBehind) view(inPlace bool) (Reader, func(), error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var (
		r       Reader
		release func()
		err     error
	)
	if inPlace {
		r, release, err = w.keptInnerView()
	} else {
		r, release, err = w.inner.View()
	}
	if err != nil || w.pending.Len() == 0 {
		return r, release, err
	}
	if inPlace {
		if w.applyView == nil {
			w.applyView = &windowView{}
		}
		w.applyView.base, w.applyView.items = r, w.pending
		return w.applyView, release, nil
	}
	if w.snap == nil {
		w.snap = w.pending.Clone()
	}
	return &windowView{base: r, items: w.snap}, release, nil
}

// keptInnerView returns the writer's kept view of the store under it,
// taking one if there is none (w.mu held).
func (w *WriteBehind) keptInnerView() (Reader, func(), error) {
	if w.applyInner == nil {
		r, release, err := w.inner.View()
		if err != nil {
			return nil, nil, err
		}
		w.applyInner = &sharedView{r: r, release: release}
	}
	sv := w.applyInner
	sv.refs++
	var once sync.Once
	return sv.r, func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if sv.refs--; sv.refs == 0 && sv != w.applyInner {
				sv.release()
			}
		})
	}, nil
}

// Commit implements Store: the batches join the window (each keeps its
// atomicity: a window is written as one transaction), which is written out
// first if they would take it past the transaction limits, and after them
// if it is maxAge old.
func (w *WriteBehind) Commit(batches [][]Write) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	for _, b := range batches {
		size := 0
		for _, x := range b {
			size += writeSize(x)
		}
		if w.pending.Len() > 0 && (w.size+size > w.maxBytes || w.pending.Len()+len(b) > w.maxWrites) {
			if err := w.flushLocked(); err != nil {
				return err
			}
		}
		for _, x := range b {
			prev, had := w.pending.ReplaceOrInsert(item{key: x.Key, val: x.Val})
			if had {
				w.size -= writeSize(Write{Key: prev.key, Val: prev.val})
			}
			w.size += writeSize(x)
		}
	}
	w.snap = nil
	if w.pending.Len() == 0 {
		return nil
	}
	now := time.Now()
	if w.since.IsZero() {
		w.since = now
		w.arm()
	}
	if now.Sub(w.since) >= w.maxAge {
		return w.flushLocked()
	}
	return nil
}

// arm starts the idle timer of a new window.
func (w *WriteBehind) arm() {
	if w.timer == nil {
		w.timer = time.AfterFunc(w.maxAge, w.onTimer)
		return
	}
	w.timer.Reset(w.maxAge)
}

// onTimer writes out a window that is still pending maxAge after its first
// write (a writer that stopped committing).
func (w *WriteBehind) onTimer() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.failed != nil || w.pending.Len() == 0 {
		return
	}
	if time.Since(w.since) < w.maxAge {
		w.timer.Reset(w.maxAge - time.Since(w.since)) // a newer window
		return
	}
	_ = w.flushLocked() // a failure is kept in w.failed for the next call
}

func (w *WriteBehind) usable() error {
	if w.failed != nil {
		return w.failed
	}
	if w.closed {
		return fmt.Errorf("state store: write-behind buffer is closed")
	}
	return nil
}

// flushLocked writes the window out as one transaction of the store under
// it and starts an empty one. Views taken before keep the old window and
// the inner view they were taken with; views taken after see the inner
// store with the window in it.
func (w *WriteBehind) flushLocked() error {
	if w.pending.Len() == 0 {
		return nil
	}
	writes := make([]Write, 0, w.pending.Len())
	w.pending.Ascend(func(it item) bool {
		writes = append(writes, Write{Key: it.key, Val: it.val})
		return true
	})
	w.dropApplyInner() // taken before the window is in the store under it
	if err := w.inner.Commit([][]Write{writes}); err != nil {
		w.failed = err
		return err
	}
	w.pending, w.snap, w.size, w.since = newPending(), nil, 0, time.Time{}
	if w.timer != nil {
		w.timer.Stop()
	}
	return nil
}

// Flush writes the pending window to the store under it (without syncing).
func (w *WriteBehind) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	return w.flushLocked()
}

// Sync implements Store: the window is written out, then the store under
// it synced.
func (w *WriteBehind) Sync() error {
	if err := w.Flush(); err != nil {
		return err
	}
	return w.inner.Sync()
}

// Replace implements Store: the pending window is dropped (the state it
// described is replaced), then the store under it replaced. Views wait
// until it is done.
func (w *WriteBehind) Replace(load func(put func(k, v []byte) error) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.usable()
	}
	w.pending, w.snap, w.size, w.since = newPending(), nil, 0, time.Time{}
	if w.timer != nil {
		w.timer.Stop()
	}
	w.dropApplyInner()
	if err := w.inner.Replace(load); err != nil {
		return err
	}
	w.failed = nil // the store under it was rebuilt whole
	return nil
}

// Close implements Store: the window is written out, then the store under
// it closed.
func (w *WriteBehind) Close() error {
	w.mu.Lock()
	var err error
	if !w.closed {
		if w.failed == nil {
			err = w.flushLocked()
		}
		w.closed = true
		if w.timer != nil {
			w.timer.Stop()
		}
		w.dropApplyInner()
	}
	w.mu.Unlock()
	if cerr := w.inner.Close(); err == nil {
		err = cerr
	}
	return err
}
