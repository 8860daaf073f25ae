package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/skl"
)

// BadgerStore is the production Store: badger/v4 in a directory of its own,
// used as an ordered byte engine (see DESIGN.md).
//
// Writes are not fsynced one by one (SyncWrites off): a process crash keeps
// them (they are in the page cache), and after a machine crash badger
// recovers a consistent prefix of committed transactions. A writer that
// records its progress in the same transaction as the state it describes
// (the state machine's applied index) therefore always finds a
// self-consistent prefix; Sync is for the moments that must not lose even
// that (before a raft snapshot is reported persisted).
type BadgerStore struct {
	db *badger.DB
	// completionKey is written last by Replace (BadgerOptions).
	completionKey []byte
	// txnBytes and txnWrites are what one transaction may hold, with a
	// margin under badger's own limits (see TxnLimits).
	txnBytes, txnWrites int
	// fault reports a storage error badger logged or returned on a read
	// (see OnError).
	fault *storeFault
	// writing tracks the commits handed to badger's writer and not yet
	// written (Commit does not wait for them).
	writing inflight
	// compact stops badger's compactors while the store is idle.
	compact *compactGate
	// views counts the read views not yet released, so Close waits for
	// them: badger panics on a read of a closed database.
	views openViews
}

// openViews counts open read views; once closed it refuses new ones.
type openViews struct {
	mu      sync.Mutex
	open    int
	closed  bool
	drained chan struct{} // closed when closed and no view is open
}

// ErrStoreClosed is returned by View once the store is closing.
var ErrStoreClosed = errors.New("state store is closed (the agent is stopping)")

func (v *openViews) acquire() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return ErrStoreClosed
	}
	v.open++
	return nil
}

func (v *openViews) release() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.open--; v.open == 0 && v.closed {
		close(v.drained)
	}
}

// closeAndWait refuses new views and waits for the open ones, at most
// wait (a view never released must not stop the agent from stopping).
func (v *openViews) closeAndWait(wait time.Duration) {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return
	}
	v.closed = true
	v.drained = make(chan struct{})
	if v.open == 0 {
		close(v.drained)
	}
	v.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-v.drained:
	case <-t.C:
	}
}

// inflight tracks commits in flight by sequence number, so settle waits
// for those issued before it and not for later ones (a Sync while the
// applier goes on committing).
type inflight struct {
	mu   sync.Mutex
	cond sync.Cond
	next uint64
	open map[uint64]struct{}
	err  error // the first failed commit
}

func (f *inflight) issue() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open == nil {
		f.open = map[uint64]struct{}{}
		f.cond.L = &f.mu
	}
	f.next++
	f.open[f.next] = struct{}{}
	return f.next
}

// done settles commit seq and reports whether err is the first failure.
func (f *inflight) done(seq uint64, err error) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.open, seq)
	first := err != nil && f.err == nil
	if first {
		f.err = err
	}
	f.cond.Broadcast()
	return first
}

// failed is the first error a commit met after Commit returned.
func (f *inflight) failed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// settle waits until every commit issued so far is written, and returns
// the first that failed.
func (f *inflight) settle() error {
	f.mu.Lock()
	target := f.next
	f.mu.Unlock()
	return f.settleUpTo(target)
}

// settleUpTo waits until every commit up to seq target is written.
func (f *inflight) settleUpTo(target uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		waiting := false
		for seq := range f.open {
			if seq <= target {
				waiting = true
				break
			}
		}
		if !waiting {
			return f.err
		}
		f.cond.Wait()
	}
}

// defaultMemTableSize is badger's default memtable. It sets the
// transaction limit too: badger refuses a transaction over 15% of a
// memtable (~9.6 MB here); two memtables bound the memory they take.
const defaultMemTableSize = 64 << 20

// memTableSize is the memtable that takes a transaction of need bytes
// within TxnLimits' margin: badger's default, or larger when need calls
// for it.
func memTableSize(need int) int64 {
	size := int64(defaultMemTableSize)
	for txnBytesOf(size) < int64(need) {
		size += 16 << 20
	}
	return size
}

// txnBytesOf is TxnLimits' byte limit for a memtable: badger's own
// (15% of it, opt.maxBatchSize) with a 10% margin.
func txnBytesOf(memTable int64) int64 { return 15 * memTable / 100 * 9 / 10 }

// TxnLimits implements TxnLimiter: the largest transaction the store takes,
// in bytes as Overlay counts them (key + value + 16 per write, at least
// badger's own estimate) and in writes, with a margin under badger's
// limits.
func (b *BadgerStore) TxnLimits() (bytes, writes int) { return b.txnBytes, b.txnWrites }

// BadgerOptions tunes the store; zero values take defaults. The store
// knows nothing of what its keys mean: the two facts it needs from its
// writer come in here (the state machine fills them, fsm.OpenBadger).
type BadgerOptions struct {
	InMemory       bool
	BlockCacheSize int64
	Logger         *slog.Logger
	// CompletionKey, if set, is the key whose value says a Replace
	// completed: Replace writes it after every other pair, in a
	// transaction of its own once the rest is written, so a Replace cut
	// short leaves a store without it (for the state machine, its
	// applied-index key: such a store reports an index below the
	// snapshot's, and raft restores the snapshot again).
	CompletionKey []byte
	// MaxTxnBytes is the largest unit the writer must be able to commit in
	// one transaction, counted as TxnLimits counts (for the state
	// machine, the most one log entry may write). The memtable is sized so
	// that TxnLimits' byte limit is at least this; 0 keeps badger's
	// default memtable.
	MaxTxnBytes int
	// CompactorIdle is how long the store goes without a commit, with
	// nothing to compact, before badger's compactors stop until the next
	// commit (compact.go); 0 is DefaultCompactorIdle, negative never.
	CompactorIdle time.Duration
	// compactChanged, if set (tests), is told every stop and start.
	compactChanged func(stopped bool)
}

// OpenBadger opens (or creates) a badger store in dir.
func OpenBadger(dir string, o BadgerOptions) (*BadgerStore, error) {
	if !o.InMemory {
		if err := verifyTables(dir); err != nil {
			return nil, err
		}
	}
	fault := &storeFault{}
	// Errors badger logs while opening (a table whose checksum does not
	// match is logged and then left out: its keys would silently vanish)
	// fail the open.
	var openErrs []string
	fault.set(func(err error) { openErrs = append(openErrs, err.Error()) })
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(false).
		WithNumVersionsToKeep(1).
		WithMetricsEnabled(false).
		// One writer (the applier): conflict tracking is pure cost.
		WithDetectConflicts(false).
		// Tables are built on every memtable flush; snappy there cost more
		// CPU than the disk it saves (records are small JSON).
		WithCompression(options.None).
		// Each compactor wakes every 50 ms, work or not; two (the fewest
		// badger accepts) keep up with the queue workload, and they are
		// stopped while the store is idle (compact.go).
		WithNumCompactors(2).
		// Verify block checksums on every read and table checksums before
		// a table is opened: a damaged SST is an error (the node stops at
		// start), never a silently missing key.
		// (verifyTables does the latter, because badger's own check can
		// crash or skip a damaged table).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithLogger(badgerLogger{l: o.Logger, fault: fault})
	if o.BlockCacheSize > 0 {
		opts = opts.WithBlockCacheSize(o.BlockCacheSize)
	} else {
		opts = opts.WithBlockCacheSize(32 << 20)
	}
	opts = opts.WithIndexCacheSize(16 << 20).WithMemTableSize(memTableSize(o.MaxTxnBytes)).WithNumMemtables(2)
	if o.InMemory {
		opts = opts.WithInMemory(true).WithDir("").WithValueDir("")
	}
	db, err := badger.Open(opts)
	if err != nil {
		if len(openErrs) > 0 || isDamage(err) {
			return nil, &StorageError{Op: "open " + dir, Err: fmt.Errorf("%w; %s", err, strings.Join(openErrs, "; "))}
		}
		return nil, fmt.Errorf("open badger state in %s: %w (is another flowd agent using this --data-dir?)", dir, err)
	}
	fault.set(nil)
	if len(openErrs) > 0 {
		_ = db.Close()
		return nil, &StorageError{Op: "open " + dir, Err: fmt.Errorf("%s", strings.Join(openErrs, "; "))}
	}
	maxBytes := 15 * opts.MemTableSize / 100 // badger: opt.maxBatchSize
	idle := o.CompactorIdle
	if idle == 0 {
		idle = DefaultCompactorIdle
	}
	return &BadgerStore{db: db, txnBytes: int(txnBytesOf(opts.MemTableSize)),
		txnWrites: int(maxBytes/int64(skl.MaxNodeSize)) * 9 / 10, fault: fault,
		completionKey: bytes.Clone(o.CompletionKey), compact: newCompactGate(db, idle, o.compactChanged)}, nil
}

// View implements Store.
func (b *BadgerStore) View() (Reader, func(), error) {
	if err := b.views.acquire(); err != nil {
		return nil, nil, err
	}
	txn := b.db.NewTransaction(false)
	var once sync.Once
	return badgerReader{txn, b.fault}, func() {
		once.Do(func() {
			txn.Discard()
			b.views.release()
		})
	}, nil
}

// Commit implements Store. It hands each transaction to badger's writer
// and returns without waiting for the write (txn.CommitWith): the caller
// (the FSM, on raft's apply goroutine) answers the entry's callers while
// badger writes, so the write leaves the commit round trip. Nothing reads
// around it: badger starts every later transaction, read or write, only
// once the commits before it are written (its oracle waits for them), so
// a view taken after Commit returns sees the commit, and commits are
// written in order. A write that fails is reported through OnError (the
// node stops) and fails the next Commit, Sync or Replace. The keys and
// values are handed over: they are not copied and must not change.
func (b *BadgerStore) Commit(batches [][]Write) error {
	if err := b.writing.failed(); err != nil {
		return err
	}
	b.compact.committed()
	for _, batch := range batches {
		txn := b.db.NewTransaction(true)
		for _, w := range batch {
			var err error
			if w.Val == nil {
				err = txn.Delete(w.Key)
			} else {
				err = txn.Set(w.Key, w.Val)
			}
			if err != nil {
				txn.Discard()
				return fmt.Errorf("badger write: %w", err)
			}
		}
		seq := b.writing.issue()
		txn.CommitWith(func(err error) { b.written(seq, err) })
	}
	return nil
}

// written is the callback of commit seq. A failure is recorded before the
// commit counts as settled and reported after, so settle sees it and
// OnError may close the store.
func (b *BadgerStore) written(seq uint64, err error) {
	if err != nil {
		err = &StorageError{Op: "commit", Err: err}
	}
	if b.writing.done(seq, err) {
		b.fault.report(err)
	}
}

// Replace implements Store. The completion key (BadgerOptions) is written
// last, in a transaction of its own, so an interrupted Replace leaves a
// store without it.
func (b *BadgerStore) Replace(load func(put func(k, v []byte) error) error) error {
	if err := b.writing.settle(); err != nil {
		return err
	}
	if err := b.compact.exclusive(func() error { return b.replace(load) }); err != nil {
		return err
	}
	return b.Sync()
}

// replace is Replace with the compactors running (compactGate.exclusive).
func (b *BadgerStore) replace(load func(put func(k, v []byte) error) error) error {
	if err := b.db.DropAll(); err != nil {
		return fmt.Errorf("badger drop: %w", err)
	}
	wb := b.db.NewWriteBatch()
	var last []Write
	err := load(func(k, v []byte) error {
		if b.completionKey != nil && bytes.Equal(k, b.completionKey) {
			last = append(last, Write{Key: bytes.Clone(k), Val: bytes.Clone(v)})
			return nil
		}
		return wb.Set(bytes.Clone(k), bytes.Clone(v))
	})
	if err != nil {
		wb.Cancel()
		return err
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("badger load: %w", err)
	}
	if len(last) > 0 {
		return b.Commit([][]Write{last})
	}
	return nil
}

// Sync implements Store: the commits handed to badger are written first.
func (b *BadgerStore) Sync() error {
	if err := b.writing.settle(); err != nil {
		return err
	}
	return b.db.Sync()
}

// Close implements Store, once the commits handed to badger are written.
// A store whose directory is gone is abandoned, not closed: badger's Close
// flushes the memtable into the directory and retries a failed flush
// forever, which would hold the caller (a node stopping because its data
// dir was deleted) for good.
func (b *BadgerStore) Close() error {
	b.views.closeAndWait(closeViewWait)
	_ = b.writing.settle() // a failed write was reported when it failed
	b.compact.close()
	if o := b.db.Opts(); !o.InMemory {
		if _, err := os.Stat(o.Dir); err != nil {
			badgerStopCompactions(b.db) // the rest of badger's goroutines stay, idle
			return &StorageError{Op: "close", Err: fmt.Errorf("the state directory is gone, so the store was left open (its memtable cannot be flushed): %w", err)}
		}
	}
	return b.db.Close()
}

// closeViewWait bounds how long Close waits for open read views.
const closeViewWait = 5 * time.Second

type badgerReader struct {
	txn   *badger.Txn
	fault *storeFault
}

func (r badgerReader) Get(key []byte) ([]byte, bool, error) {
	it, err := r.txn.Get(key)
	if err == badger.ErrKeyNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, r.fault.read(err)
	}
	v, err := it.ValueCopy(nil)
	return v, err == nil, r.fault.read(err)
}

func (r badgerReader) Scan(prefix, start []byte, reverse bool, fn func(k, v []byte) bool) error {
	opts := badger.IteratorOptions{Prefix: prefix, Reverse: reverse, PrefetchValues: false}
	it := r.txn.NewIterator(opts)
	defer it.Close()
	seek := start
	if seek == nil {
		seek = prefix
		if reverse {
			seek = PrefixEnd(prefix)
		}
	}
	if seek == nil { // reverse over an all-0xff prefix
		it.Rewind()
	} else {
		it.Seek(seek)
		if reverse && start == nil && it.Valid() && bytes.Equal(it.Item().Key(), seek) {
			it.Next() // prefixEnd itself is outside the prefix
		}
	}
	for ; it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		var cont bool
		if err := item.Value(func(v []byte) error {
			cont = fn(item.Key(), v)
			return nil
		}); err != nil {
			return r.fault.read(err)
		}
		if !cont {
			return nil
		}
	}
	return nil
}

// badgerLogger routes badger's logs into slog; chatty info goes to debug.
// Every error badger logs is a storage fault (a table left out for a
// checksum mismatch, a memtable that cannot be flushed, an unreadable value
// pointer): it is reported through the store's OnError.
type badgerLogger struct {
	l     *slog.Logger
	fault *storeFault
}

func (b badgerLogger) log(level slog.Level, f string, a ...any) {
	if b.l == nil {
		return
	}
	b.l.Log(context.Background(), level, strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger")
}
func (b badgerLogger) Errorf(f string, a ...any) {
	b.log(slog.LevelError, f, a...)
	b.fault.report(fmt.Errorf("badger: %s", strings.TrimSpace(fmt.Sprintf(f, a...))))
}
func (b badgerLogger) Warningf(f string, a ...any) { b.log(slog.LevelWarn, f, a...) }
func (b badgerLogger) Infof(f string, a ...any)    { b.log(slog.LevelDebug, f, a...) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.log(slog.LevelDebug-4, f, a...) }
