package raftnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/store"
)

// Storage you can trust (DESIGN.md, "Storage failures stop the node"). A node whose
// local storage fails stops: it never serves state it cannot trust nor
// acknowledges writes it may not have persisted. The library never exits
// the process: Failed is closed, Failure says why, ApplyBatch refuses to
// apply anything more, and the daemon shuts the node down and exits with
// code 70 (cmd/flowd).

// fail records the first storage failure and tells the daemon (Failed).
// A *fsm.VersionError (this binary cannot apply the state-machine version
// the cluster moved to) stops the node the same way, reported as itself.
func (n *Node) fail(err error) {
	n.failOnce.Do(func() {
		var ve *fsm.VersionError
		if errors.As(err, &ve) {
			n.failure.Store(&err)
			n.log.Error("this binary cannot apply the cluster's state-machine version; stopping before the entry instead of diverging", "err", err)
		} else {
			f := error(&cluster.StorageFailure{Err: err})
			n.failure.Store(&f)
			n.log.Error("local storage failed; stopping this node so it cannot diverge or serve wrong data", "err", err)
		}
		close(n.failed)
	})
}

// Failed is closed when the node's local storage failed (see Failure).
func (n *Node) Failed() <-chan struct{} { return n.failed }

// Failure returns the storage failure that stopped the node, or nil.
func (n *Node) Failure() error {
	if f := n.failure.Load(); f != nil {
		return *f
	}
	return nil
}

// Health reports why this node must not serve ("" when healthy): a storage
// failure, a data directory that vanished, a disk too full, or state that
// diverged from the cluster's (the digest check).
func (n *Node) Health() string {
	if n.disk != nil && n.Failure() == nil {
		if err := n.disk.check(); err != nil {
			n.fail(err)
		}
	}
	return n.Serving()
}

// Serving is Health without looking at the disk (no system calls): what
// every client call asks. The disk is checked before raft log appends (at
// most every appendCheckEvery) and by every /readyz.
func (n *Node) Serving() string {
	if err := n.Failure(); err != nil {
		return err.Error()
	}
	return n.digest.divergence()
}

// diskGuard checks that the files the node has open are still the ones in
// its data dir (a deleted or replaced data dir keeps working through open
// file descriptors, invisibly) and that the disk has room.
type diskGuard struct {
	dataDir string
	paths   []string
	infos   []os.FileInfo
	minFree int64

	mu  sync.Mutex
	err error
	ok  time.Time // when a check last passed
}

// appendCheckEvery bounds how often a raft log append pays the disk check
// (three system calls): under load the log is appended thousands of times
// a second, and a data dir deleted or a disk filled is still caught within
// this much time (a write that fails meanwhile stops the node anyway).
const appendCheckEvery = 20 * time.Millisecond

// checkRecent is check, skipped when one passed within appendCheckEvery.
func (g *diskGuard) checkRecent() error {
	g.mu.Lock()
	fresh := g.err == nil && !g.ok.IsZero() && time.Since(g.ok) < appendCheckEvery
	g.mu.Unlock()
	if fresh {
		return nil
	}
	return g.check()
}

func newDiskGuard(dataDir string, minFree int64, paths ...string) (*diskGuard, error) {
	g := &diskGuard{dataDir: dataDir, minFree: minFree}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		g.paths, g.infos = append(g.paths, p), append(g.infos, fi)
	}
	return g, nil
}

// check costs a stat per path and a statfs (every /readyz; appends use
// checkRecent).
func (g *diskGuard) check() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return g.err
	}
	for i, p := range g.paths {
		fi, err := os.Stat(p)
		if err != nil || !os.SameFile(fi, g.infos[i]) {
			g.err = fmt.Errorf("%s was deleted or replaced while the agent was running (the data dir %s is gone?): %v", p, g.dataDir, err)
			return g.err
		}
	}
	if g.minFree > 0 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(g.paths[0], &st); err == nil {
			free := int64(st.Bavail) * int64(st.Bsize)
			if free < g.minFree {
				g.err = fmt.Errorf("disk full: %d bytes free on the file system of %s (the agent needs at least %d): %w", free, g.dataDir, g.minFree, syscall.ENOSPC)
				return g.err
			}
		}
	}
	g.ok = time.Now()
	return nil
}

// checkedLogStore is the raft log store with failures made fatal: a failed
// append (a read-only or immutable raft.db, a full disk, a vanished data
// dir) stops the node at once instead of looping on "failed to append to
// logs" while /readyz answers 200.
type checkedLogStore struct {
	raft.LogStore
	n *Node
}

// guard checks the disk before an operation (err nil, before: true) and
// makes a failed one fatal.
func (s *checkedLogStore) guard(op string, err error, before bool) error {
	if before && s.n.disk != nil {
		err = s.n.disk.checkRecent()
	}
	if err != nil {
		s.n.fail(fmt.Errorf("raft log %s: %w", op, err))
		return err
	}
	return nil
}

func (s *checkedLogStore) StoreLog(l *raft.Log) error {
	if err := s.guard("append", nil, true); err != nil {
		return err
	}
	return s.guard("append", s.LogStore.StoreLog(l), false)
}

func (s *checkedLogStore) StoreLogs(logs []*raft.Log) error {
	if err := s.guard("append", nil, true); err != nil {
		return err
	}
	return s.guard("append", s.LogStore.StoreLogs(logs), false)
}

// IsMonotonic passes the store's raft.MonotonicLogStore through: raft-wal
// takes no gap in its indexes, so after installing a snapshot raft must
// empty the log instead of keeping trailing entries.
func (s *checkedLogStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (s *checkedLogStore) DeleteRange(min, max uint64) error {
	return s.guard("compaction", s.LogStore.DeleteRange(min, max), false)
}

// checkedStableStore: raft's term and vote, same rule.
type checkedStableStore struct {
	raft.StableStore
	n *Node
}

func (s *checkedStableStore) Set(k, v []byte) error {
	err := s.StableStore.Set(k, v)
	if err != nil {
		s.n.fail(fmt.Errorf("raft stable store: %w", err))
	}
	return err
}

func (s *checkedStableStore) SetUint64(k []byte, v uint64) error {
	err := s.StableStore.SetUint64(k, v)
	if err != nil {
		s.n.fail(fmt.Errorf("raft stable store: %w", err))
	}
	return err
}

// guardStores wires the failure paths of the production stores.
func (n *Node) guardStores(bs *store.BadgerStore) error {
	if bs != nil {
		bs.OnError(func(err error) { n.fail(&store.StorageError{Op: "badger", Err: err}) })
	}
	n.fsm.OnFatal = n.fail
	if n.cfg.DataDir == "" {
		return nil
	}
	minFree := n.cfg.MinFreeBytes
	if minFree == 0 {
		minFree = cluster.DefaultMinFreeBytes
	}
	paths := []string{filepath.Join(n.cfg.DataDir, "raft")}
	paths = append(paths, logStorePaths(paths[0])...) // raft.db, or wal/ and stable.db
	if p := filepath.Join(n.cfg.DataDir, "state"); exists(p) {
		paths = append(paths, p)
	}
	g, err := newDiskGuard(n.cfg.DataDir, minFree, paths...)
	if err != nil {
		return err
	}
	n.disk = g
	if err := g.check(); err != nil {
		return &cluster.StorageFailure{Err: err}
	}
	return nil
}
