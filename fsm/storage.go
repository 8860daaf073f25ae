package fsm

import "github.com/flowd/flowd/fsm/store"

// Reader is the read view FSM.View hands out and the applier reads
// through: the byte engine's store.Reader under the state machine's own
// name. An alias, not a type of its own, so the one interface is declared
// in one place, while the queries and apply handlers that take a Reader
// (and callers of View) need not name the engine package.
type Reader = store.Reader

// OpenBadger opens (or creates) the badger store in dir for this state
// machine: the byte engine is told the two facts of the key schema and
// the apply path it needs (store.BadgerOptions), whatever o says of them.
func OpenBadger(dir string, o store.BadgerOptions) (*store.BadgerStore, error) {
	// Restore's Replace writes the applied index last, so a restore cut
	// short leaves a state that reports an index below the snapshot's and
	// is restored again.
	o.CompletionKey = keyApplied
	// An entry the FSM accepts must fit in one transaction on its own,
	// with the applied index ApplyBatch writes beside it.
	o.MaxTxnBytes = MaxEntryWriteBytes + len(keyApplied) + 8 + 16
	return store.OpenBadger(dir, o)
}
