package store

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

// Tx is the narrow transaction the state machine writes through.
type Tx interface {
	Reader
	Set(key, val []byte) error
	Delete(key []byte) error
}

// Store is the durable key/value state. Its one writer (the state machine)
// calls Commit and Replace; anyone may read through View.
type Store interface {
	// View returns a point-in-time reader; call release when done.
	View() (r Reader, release func(), err error)
	// Commit writes batches atomically, each batch in its own transaction,
	// in order. A store may keep the keys and values it is given (an
	// in-memory mirror or cache may): the caller hands them over and never
	// modifies them afterwards. The slices that hold them (batches and each
	// batch) are the caller's again once Commit returns: a store does not
	// keep them.
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

// PrefixProber is an optional Reader (or Store) method: whether any key
// may start with prefix. false is certain; true may be wrong (a reader
// that cannot tell cheaply says true).
type PrefixProber interface {
	MayHavePrefix(prefix []byte) bool
}

// TxnLimiter is a store whose transactions are bounded (badger). A writer
// closes a transaction before it would pass either limit.
type TxnLimiter interface {
	// TxnLimits reports the largest transaction the store takes, in bytes
	// (key + value + 16 per write, as Overlay.Size counts them) and in
	// writes; 0, 0 means no limit.
	TxnLimits() (bytes, writes int)
}
