package store

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	badger "github.com/dgraph-io/badger/v4"
)

// StorageError is a failure of this node's local state store: a damaged
// table, an unreadable value, a write or flush that failed (a full disk).
// It is never the result of an entry: a node whose store fails must stop
// rather than serve or apply on top of state it cannot trust (see
// DESIGN.md beside this file, "Faults stop the node, never fail an entry";
// ../DESIGN.md, invariant "A local storage failure stops the node";
// cluster/raftnode/DESIGN.md, "Storage failures stop the node"; and
// docs/operations.md, "Storage failures").
type StorageError struct {
	Op  string
	Err error
}

func (e *StorageError) Error() string {
	return fmt.Sprintf("local state store failed (%s): %v", e.Op, e.Err)
}

func (e *StorageError) Unwrap() error { return e.Err }

// isDamage reports whether a badger error means damaged files rather than,
// say, a held lock.
func isDamage(err error) bool {
	s := err.Error()
	return strings.Contains(s, "CHECKSUM_MISMATCH") || strings.Contains(s, "checksum") ||
		strings.Contains(s, "corrupt") || strings.Contains(s, "truncate")
}

// storeFault routes storage errors to the handler set with OnError.
type storeFault struct {
	mu sync.Mutex
	fn func(error)
}

func (f *storeFault) set(fn func(error)) {
	f.mu.Lock()
	f.fn = fn
	f.mu.Unlock()
}

func (f *storeFault) report(err error) {
	if f == nil || err == nil {
		return
	}
	f.mu.Lock()
	fn := f.fn
	f.mu.Unlock()
	if fn != nil {
		fn(err)
	}
}

// read passes a read error through, reporting it unless it only means the
// store is closing.
func (f *storeFault) read(err error) error {
	if err == nil || errors.Is(err, badger.ErrDBClosed) || errors.Is(err, badger.ErrDiscardedTxn) {
		return err
	}
	f.report(&StorageError{Op: "read", Err: err})
	return err
}

// OnError sets what happens when the store reports a fault while running:
// an error badger logs (a table it would leave out, a memtable flush that
// failed, an unreadable value) or a read that fails. The node stops on it.
func (b *BadgerStore) OnError(fn func(error)) { b.fault.set(fn) }
