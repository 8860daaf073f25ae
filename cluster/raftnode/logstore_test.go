package raftnode

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
)

// lockedBuffer is a log sink safe for the node's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func withLogStore(kind string, more func(*Config)) func(*Config) {
	return func(cfg *Config) {
		cfg.RaftLogStore, cfg.DigestInterval, cfg.DisableLoops = kind, -1, true
		if more != nil {
			more(cfg)
		}
	}
}

func submitRuns(t *testing.T, c *TestCluster, prefix string, n int) uint64 {
	t.Helper()
	spec := mustSpec(t, `{"tasks":[{"key":"a","type":"t"}]}`)
	var idx uint64
	for i := range n {
		_, idx = c.Propose(&fsm.Submit{ID: fmt.Sprintf("%s%03d", prefix, i), Spec: spec})
	}
	return idx
}

func TestDetectLogStore(t *testing.T) {
	dir := t.TempDir()
	touch := func(name string, isDir bool) {
		t.Helper()
		var err error
		if isDir {
			err = os.Mkdir(filepath.Join(dir, name), 0o750)
		} else {
			err = os.WriteFile(filepath.Join(dir, name), nil, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(want, wantErr string) {
		t.Helper()
		got, err := detectLogStore(dir)
		if got != want || (err == nil) != (wantErr == "") || (err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Fatalf("detect: %q, %v; want %q, error containing %q", got, err, want, wantErr)
		}
	}
	check("", "")
	touch(walStableFile, false)
	check("", "its raft log is gone")
	touch(walLogDir, true)
	check(cluster.LogStoreWAL, "")
	touch(boltLogFile, false)
	check("", "both a bolt raft log")
	if err := os.RemoveAll(filepath.Join(dir, walLogDir)); err != nil {
		t.Fatal(err)
	}
	check(cluster.LogStoreBolt, "")
}

func TestNewDataDirGetsTheConfiguredLogStore(t *testing.T) {
	for _, kind := range []string{"", cluster.LogStoreBolt, cluster.LogStoreWAL} {
		t.Run("store="+kind, func(t *testing.T) {
			c := NewTestCluster(t, 3, withLogStore(kind, nil))
			idx := submitRuns(t, c, "r", 10)
			c.WaitForApplied(idx)
			want := kind
			if want == "" {
				want = cluster.DefaultLogStore
			}
			for _, n := range c.Nodes {
				if got := n.RaftLogStore(); got != want {
					t.Fatalf("%s runs %q, want %q", n.ID(), got, want)
				}
				got, err := detectLogStore(filepath.Join(n.cfg.DataDir, "raft"))
				if err != nil || got != want {
					t.Fatalf("%s's data dir holds %q (%v), want %q", n.ID(), got, err, want)
				}
			}
			assertConverged(t, c)
		})
	}
}

// A node created with bolt, restarted with --raft-log-store wal, keeps bolt
// and its data (and says so at info); likewise the other way round.
func TestExistingDataDirKeepsItsLogStore(t *testing.T) {
	for _, from := range []string{cluster.LogStoreBolt, cluster.LogStoreWAL} {
		to := map[string]string{cluster.LogStoreBolt: cluster.LogStoreWAL, cluster.LogStoreWAL: cluster.LogStoreBolt}[from]
		t.Run(from+"->"+to, func(t *testing.T) {
			c := NewTestCluster(t, 3, withLogStore(from, nil))
			idx := submitRuns(t, c, "before", 20)
			c.WaitForApplied(idx)
			f := c.Followers()[0]
			i := c.Kill(f)
			var logs lockedBuffer
			c.cfgFn = withLogStore(to, func(cfg *Config) {
				if cfg.NodeID == fmt.Sprintf("n%d", i+1) {
					cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				}
			})
			n := c.Restart(i)
			if got := n.RaftLogStore(); got != from {
				t.Fatalf("restarted with %s, runs %q: want the data dir's %q", to, got, from)
			}
			if got, err := detectLogStore(filepath.Join(n.cfg.DataDir, "raft")); err != nil || got != from {
				t.Fatalf("data dir now holds %q (%v), want %q only", got, err, from)
			}
			if !strings.Contains(logs.String(), "level=INFO") || !strings.Contains(logs.String(), "--raft-log-store is ignored") {
				t.Fatalf("no info that the flag was ignored:\n%s", logs.String())
			}
			if n.FSM().AppliedIndex() < idx {
				// The state store kept what it applied; raft's log too (the
				// node catches up from its own log, then the leader's).
				t.Fatalf("restarted node starts at %d, had applied %d", n.FSM().AppliedIndex(), idx)
			}
			idx = submitRuns(t, c, "after", 10)
			c.WaitForApplied(idx)
			assertConverged(t, c)
		})
	}
}

// The documented move to the other store: a node's data dir moved aside and
// the node started empty with the other --raft-log-store. The leader has
// compacted its log, so the node catches up by installing a snapshot, then
// takes the log after it; restarted again, it resumes from its own log.
func TestRebuildNodeOnTheOtherLogStoreFromASnapshot(t *testing.T) {
	for _, to := range []string{cluster.LogStoreWAL, cluster.LogStoreBolt} {
		from := map[string]string{cluster.LogStoreBolt: cluster.LogStoreWAL, cluster.LogStoreWAL: cluster.LogStoreBolt}[to]
		t.Run(from+"->"+to, func(t *testing.T) {
			compact := func(cfg *Config) {
				cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.TrailingLogs = 32, 20*time.Millisecond, 8
			}
			c := NewTestCluster(t, 3, withLogStore(from, compact))
			f := c.Followers()[0]
			i := c.Kill(f)
			// Written while the node is away, then compacted: the leader
			// no longer has the entries it would need to send.
			submitRuns(t, c, "away", 80)
			waitSnapshot(t, c.Leader())
			dir := c.dirs[i]
			if err := os.Rename(dir, dir+".aside"); err != nil {
				t.Fatal(err)
			}
			c.cfgFn = withLogStore(to, compact)
			n := c.Restart(i)
			if got := n.RaftLogStore(); got != to {
				t.Fatalf("rebuilt node runs %q, want %q", got, to)
			}
			idx := submitRuns(t, c, "back", 10)
			c.WaitForApplied(idx)
			// The leader no longer has the compacted entries (walLog hides
			// those raft-wal could still read), so the node must have
			// installed a snapshot.
			if metas, _ := n.cfg.SnapshotStore.List(); len(metas) == 0 {
				t.Fatal("the rebuilt node installed no snapshot: the test did not exercise the catch-up it means to")
			}
			assertConverged(t, c)

			// Restarted on its new store, it resumes from it.
			i = c.Kill(n)
			n = c.Restart(i)
			if got := n.RaftLogStore(); got != to {
				t.Fatalf("after restart runs %q, want %q", got, to)
			}
			idx = submitRuns(t, c, "again", 10)
			c.WaitForApplied(idx)
			assertConverged(t, c)
		})
	}
}

// A wal that fails an append stops the node (storage.go), as bolt's does:
// here the WAL is closed under the running follower, so its next append
// returns an error.
func TestWALAppendFailureStopsTheNode(t *testing.T) {
	c := NewTestCluster(t, 3, withLogStore(cluster.LogStoreWAL, nil))
	f := c.Followers()[0]
	var w *wal.WAL
	for _, cl := range f.closers {
		if x, ok := cl.(*wal.WAL); ok {
			w = x
		}
	}
	if w == nil {
		t.Fatal("the follower has no wal open")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c.Propose(&fsm.QueueSet{Name: "q", Concurrency: 2})
	select {
	case <-f.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("node did not fail")
	}
	if !strings.Contains(f.Failure().Error(), "raft log append") {
		t.Fatalf("failure: %v", f.Failure())
	}
	if f.Health() == "" {
		t.Fatal("a failed node reports itself healthy")
	}
	// The others go on.
	_, idx := c.Propose(&fsm.QueueSet{Name: "q", Concurrency: 3})
	for _, n := range c.Nodes {
		if n == f {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := n.WaitForApplied(ctx, idx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A follower that clears its log suffix (raft's DeleteRange of the tail,
// after an election found it ahead) and is then killed must open its log
// again. raft-wal before v0.4.1 marked the tail segment sealed without
// writing its index block, and the restart panicked in raft.NewRaft with
// "sealed segment has no index block" (a kill9-follower chaos cycle found
// it).
func TestWALOpensAfterTheTailWasTruncated(t *testing.T) {
	dir := t.TempDir()
	open := func() (*Node, raft.LogStore) {
		n := &Node{log: slog.New(slog.DiscardHandler)}
		n.cfg.DataDir, n.cfg.RaftLogStore = dir, cluster.LogStoreWAL
		logs, _, err := n.openRaftStores()
		if err != nil {
			t.Fatal(err)
		}
		return n, logs
	}
	closeAll := func(n *Node) {
		for i := len(n.closers) - 1; i >= 0; i-- {
			_ = n.closers[i].Close()
		}
	}
	entry := func(i uint64, term uint64) *raft.Log {
		return &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("e%d.%d", i, term))}
	}
	n, logs := open()
	for i := uint64(1); i <= 10; i++ {
		if err := logs.StoreLog(entry(i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := logs.DeleteRange(9, 10); err != nil { // clearing log suffix
		t.Fatal(err)
	}
	if err := logs.StoreLogs([]*raft.Log{entry(9, 2), entry(10, 2)}); err != nil {
		t.Fatal(err)
	}
	closeAll(n) // as far as the files go, a kill: nothing else is written on close
	n, logs = open()
	defer closeAll(n)
	var got raft.Log
	for i := uint64(1); i <= 10; i++ {
		if err := logs.GetLog(i, &got); err != nil {
			t.Fatalf("entry %d after the restart: %v", i, err)
		}
		if want := entry(i, map[bool]uint64{true: 2, false: 1}[i >= 9]); got.Term != want.Term || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("entry %d after the restart: term %d %q, want term %d %q", i, got.Term, got.Data, want.Term, want.Data)
		}
	}
}
