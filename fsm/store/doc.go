// Package store is the byte engine under the state machine: an ordered,
// transactional key/value store of opaque bytes, and the write buffer the
// state machine applies a batch into.
//
// Store (Commit, Replace, View, Sync) and Reader/Tx are the interfaces;
// BadgerStore (badger/v4, with its tables verified before they are
// opened) is the production Store and MemStore the in-memory one for
// tests and tooling. Overlay is the write buffer over a Reader, with an
// undo journal and savepoints, recycled through a Pool; Tree is an
// in-memory ordered map that reads as a Reader, for state kept in memory
// beside a durable store. A failure of the local store is a StorageError.
//
// The package knows nothing of what its keys mean. What it needs from its
// writer comes in as options (BadgerOptions.CompletionKey,
// BadgerOptions.MaxTxnBytes), filled by package fsm. See DESIGN.md beside
// this file.
package store
