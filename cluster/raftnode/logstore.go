package raftnode

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"go.etcd.io/bbolt"

	"github.com/flowd/flowd/cluster"
)

// The raft log store (DESIGN.md, "The raft log store"). A data dir holds
// one of two layouts under raft/:
//
//   - bolt: raft.db, raft-boltdb holding the log and the stable store (term
//     and vote);
//   - wal: wal/, raft-wal's segment files (the log, one fsync per append),
//     and stable.db, raft-boltdb holding only the stable store.
//
// A data dir keeps the store it was created with: Config.RaftLogStore only
// chooses for a new one. Moving a node to the other store is rebuilding it
// from a snapshot (docs/operations.md, "Raft log store").

const (
	boltLogFile   = "raft.db"
	walLogDir     = "wal"
	walStableFile = "stable.db"
)

// detectLogStore reports which log store the raft dir holds ("" for none).
func detectLogStore(raftDir string) (string, error) {
	bolt, hasWAL := exists(filepath.Join(raftDir, boltLogFile)), exists(filepath.Join(raftDir, walLogDir))
	switch {
	case bolt && hasWAL:
		return "", fmt.Errorf("%s holds both a bolt raft log (%s) and a wal one (%s/): move the one this node did not run with out of the data dir", raftDir, boltLogFile, walLogDir)
	case bolt:
		return cluster.LogStoreBolt, nil
	case hasWAL:
		return cluster.LogStoreWAL, nil
	case exists(filepath.Join(raftDir, walStableFile)):
		return "", fmt.Errorf("%s holds a wal node's %s but no %s/ (its raft log is gone): rebuild this node from a snapshot (docs/operations.md, \"Raft log store\")", raftDir, walStableFile, walLogDir)
	}
	return "", nil
}

// openRaftStores opens the data dir's raft log and stable store: the store
// the dir already holds, or for a new dir the configured one.
func (n *Node) openRaftStores() (raft.LogStore, raft.StableStore, error) {
	dir := filepath.Join(n.cfg.DataDir, "raft")
	want := n.cfg.RaftLogStore
	if want == "" {
		want = cluster.DefaultLogStore
	}
	if err := cluster.CheckLogStore(want); err != nil {
		return nil, nil, err
	}
	kind, err := detectLogStore(dir)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case kind == "":
		kind = want
		n.log.Info("new raft log", "store", kind)
	case kind != want:
		n.log.Info("this data dir keeps the raft log store it was created with; --raft-log-store is ignored. To move the node to the other store, rebuild it from a snapshot: stop it, move its data dir aside and start it empty so it joins and installs a snapshot (docs/operations.md, \"Raft log store\")",
			"store", kind, "raft_log_store", want, "data_dir", n.cfg.DataDir)
	}
	n.logStore = kind
	boltOpts := &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}
	if kind == cluster.LogStoreBolt {
		bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltLogFile), BoltOptions: boltOpts})
		if err != nil {
			return nil, nil, fmt.Errorf("open raft log in %s: %w (is another agent using this --data-dir?)", n.cfg.DataDir, err)
		}
		n.closers = append(n.closers, bolt)
		return bolt, bolt, nil
	}
	// wal/ first (a stable.db without it reads as a lost log), then the
	// stable store before the WAL: its lock (1 s timeout) is what tells a
	// second agent on the same data dir to go away; raft-wal's own metadata
	// file would wait for its lock forever.
	if err := os.MkdirAll(filepath.Join(dir, walLogDir), 0o750); err != nil {
		return nil, nil, fmt.Errorf("create raft log dir: %w", err)
	}
	stable, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, walStableFile), BoltOptions: boltOpts})
	if err != nil {
		return nil, nil, fmt.Errorf("open raft stable store in %s: %w (is another agent using this --data-dir?)", n.cfg.DataDir, err)
	}
	n.closers = append(n.closers, stable)
	// raft-wal's Close leaves its metadata file open (and locked): a node
	// restarted in the same process would wait for that lock forever. The
	// node owns it and closes it after the WAL (closers run last first).
	meta := &metadb.BoltMetaDB{}
	n.closers = append(n.closers, meta)
	w, err := wal.Open(filepath.Join(dir, walLogDir), wal.WithLogger(NewHCLogger(n.log, "wal")), wal.WithMetaStore(meta))
	if err != nil {
		return nil, nil, fmt.Errorf("open raft log in %s: %w", filepath.Join(dir, walLogDir), err)
	}
	n.closers = append(n.closers, w)
	return walLog{w}, stable, nil
}

// walLog is raft-wal with bolt's compaction semantics: an entry below
// FirstIndex is gone. raft-wal deletes whole segment files only (64 MiB),
// and reads an entry compaction removed from the segment still holding it;
// a leader would then send a lagging follower the old entries instead of
// the snapshot that replaced them. Harmless (they are committed entries),
// but two stores that differ in when a follower gets a snapshot are two
// behaviours to reason about and test.
type walLog struct{ *wal.WAL }

func (w walLog) GetLog(index uint64, log *raft.Log) error {
	if first, err := w.WAL.FirstIndex(); err == nil && index < first {
		return raft.ErrLogNotFound
	}
	return w.WAL.GetLog(index, log)
}

// RaftLogStore is the log store this node runs with (cluster.LogStoreBolt
// or LogStoreWAL; "" when a test supplied its own).
func (n *Node) RaftLogStore() string { return n.logStore }

// logStorePaths are the raft files the disk guard watches (storage.go).
func logStorePaths(raftDir string) []string {
	var out []string
	for _, name := range []string{boltLogFile, walLogDir, walStableFile} {
		if p := filepath.Join(raftDir, name); exists(p) {
			out = append(out, p)
		}
	}
	return out
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
