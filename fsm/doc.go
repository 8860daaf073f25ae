// Package fsm is flowd's replicated state machine: every state change is a
// raft log entry applied here, on every node alike.
//
// It owns the command registry and codec (registry.go, command.go: a type
// byte, then the body), the apply handlers, one file per entity
// (apply_*.go), the state-machine versions that gate rule changes
// (apply_version.go), the key schema and indexes (keys.go, dispatch.go),
// events, snapshots, the state digest and every read (query.go). Pure rules
// (state tables, derivation, spec validation, backoff) live in fsm/domain;
// the byte engine it writes through (the write buffer, badger, the
// in-memory store) in fsm/store.
//
// Apply is deterministic (no clock, randomness or map order), never panics
// (a bad entry is an error result on every replica, changing nothing), and
// writes its effects together with the applied index in one store
// transaction. See DESIGN.md beside this file.
package fsm
