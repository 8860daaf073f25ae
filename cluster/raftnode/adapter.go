package raftnode

import (
	"io"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/store"
)

// raftFSM adapts *fsm.FSM to raft.BatchingFSM. It is deliberately thin.
//
// raft's contract, copied here because the adapter relies on it:
//   - Apply/ApplyBatch, Snapshot and Restore are called from one goroutine
//     (raft's FSM goroutine) and never concurrently with each other.
//   - FSMSnapshot.Persist and Release run on another goroutine, possibly
//     concurrently with ApplyBatch. Snapshot only pins a point-in-time view
//     (a badger read transaction); Persist does the IO and calls
//     sink.Cancel on error; Release always drops the view.
//   - Restore replaces all state; the FSM swaps it in before returning.
//
// Non-command entries (configuration changes, barriers, no-ops) are handed
// to the FSM as no-ops so its applied index tracks raft's exactly.
type raftFSM struct {
	f *fsm.FSM
	n *Node // nil in tests of the adapter alone
}

var noopEntry = func() []byte {
	b, _ := fsm.Encode(&fsm.Noop{})
	return b
}()

// Apply implements raft.FSM.
func (r *raftFSM) Apply(l *raft.Log) any { return r.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch implements raft.BatchingFSM: the whole batch is one badger
// transaction (see fsm.FSM.ApplyBatch). A follower applies on a thread of
// lower priority (applythread.go).
//
// A node whose storage failed applies nothing more (storage.go). A batch is
// cut after a digest mark, so the node can pin its state at exactly the
// mark's index before applying what follows (digestcheck.go).
func (r *raftFSM) ApplyBatch(logs []*raft.Log) []any {
	if r.n == nil {
		return r.apply(logs)
	}
	r.n.applyThread.set(!r.n.IsLeader())
	out := make([]any, 0, len(logs))
	for len(logs) > 0 {
		if err := r.n.Failure(); err != nil {
			for range logs {
				out = append(out, err)
			}
			return out
		}
		cut := len(logs)
		var kind fsm.MsgType
		var verdict fsm.DigestVerdict
		for i, l := range logs {
			if l.Type != raft.LogCommand {
				continue
			}
			if k, v := fsm.DigestEntry(l.Data); k != 0 && l.Index > r.f.AppliedIndex() {
				cut, kind, verdict = i+1, k, v
				break
			}
		}
		out = append(out, r.apply(logs[:cut])...)
		if kind != 0 && r.n.Failure() == nil {
			r.n.digest.applied(kind, logs[cut-1].Index, verdict)
		}
		logs = logs[cut:]
	}
	return out
}

func (r *raftFSM) apply(logs []*raft.Log) []any {
	entries := make([]fsm.Entry, len(logs))
	for i, l := range logs {
		entries[i] = fsm.Entry{Index: l.Index, Data: l.Data}
		if l.Type != raft.LogCommand {
			entries[i].Data = noopEntry
		}
	}
	before := r.f.AppliedIndex()
	out := r.f.ApplyBatch(entries)
	if r.n != nil && r.n.auto.on.Load() && r.f.AppliedIndex() != before {
		r.n.auto.observe(r.f.LastEvents()) // adaptive concurrency (autoconc.go)
	}
	return out
}

// Snapshot implements raft.FSM.
func (r *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := r.f.Snapshot()
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{s: s, store: r.f.Store()}, nil
}

// Restore implements raft.FSM.
//
// A snapshot whose state-machine version this binary cannot apply stops the
// node (as an entry raising the version to it does).
func (r *raftFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if err := r.f.Restore(rc); err != nil {
		return err
	}
	if err := r.f.CheckVersion(); err != nil && r.n != nil {
		r.n.fail(err)
		return err
	}
	return nil
}

type fsmSnapshot struct {
	s     *fsm.Snapshot
	store store.Store
}

// Persist syncs the store first: raft compacts its log behind a persisted
// snapshot, and on restart (NoSnapshotRestoreOnStart) it replays only the
// entries after the snapshot, so everything up to the snapshot's index must
// already be durable in badger.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.store.Sync(); err != nil {
		sink.Cancel()
		return err
	}
	if _, err := s.s.WriteTo(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *fsmSnapshot) Release() { s.s.Release() }
