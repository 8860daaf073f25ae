package raftnode

import (
	"bufio"
	"context"
	"fmt"
	"github.com/flowd/flowd/internal/testing/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/store"
)

// The crash tests run a single-node cluster in a child process (this test
// binary re-executed), SIGKILL it while it applies a stream of entries, then
// restart the node from its data dir in-process and prove nothing was
// applied twice or lost: the restarted state equals a fresh replay of the
// snapshot and log.

const crashEnv = "FLOWD_CRASH_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir, os.Getenv("FLOWD_CRASH_ADDR"), os.Getenv("FLOWD_CRASH_COMPACT") == "1", os.Getenv("FLOWD_CRASH_STORE"))
		return
	}
	os.Exit(m.Run())
}

func crashConfig(dir, addr string, compact bool, logStore string) Config {
	cfg := Config{Config: cluster.Config{NodeID: "solo", DataDir: dir, RaftBind: addr, RaftLogStore: logStore,
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond}, DisableLoops: true}
	if compact {
		cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.TrailingLogs = 64, 50*time.Millisecond, 16
	}
	return cfg
}

// crashChild proposes submit/claim/complete forever from 8 goroutines,
// printing each committed index, until it is killed.
func crashChild(dir, addr string, compact bool, logStore string) {
	n, err := New(crashConfig(dir, addr, compact, logStore))
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	ctx := context.Background()
	if _, err := n.WaitForLeader(ctx); err != nil {
		os.Exit(1)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	report := func(idx uint64) {
		mu.Lock()
		fmt.Fprintln(out, idx)
		out.Flush()
		mu.Unlock()
	}
	spec := mustSpec(nil, `{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a"]}]}`)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; ; i++ {
				_, idx, err := n.Propose(ctx, &fsm.Submit{ID: fmt.Sprintf("g%d-%d", g, i), Spec: spec})
				if err != nil {
					continue
				}
				report(idx)
				res, idx, err := n.Propose(ctx, &fsm.Claim{Waiters: []fsm.Waiter{{WorkerID: "w", Max: 2}}})
				if err != nil {
					continue
				}
				report(idx)
				for _, c := range res.(*fsm.ClaimResult).Assigned[0] {
					if _, idx, err := n.Propose(ctx, &fsm.Complete{TaskID: c.TaskID, Token: c.FencingToken}); err == nil {
						report(idx)
					}
				}
			}
		}()
	}
	select {}
}

// hasSnapshot reports whether the node in dir has persisted a raft snapshot
// (the file snapshot store's finished directories; ".tmp" ones are in
// progress).
func hasSnapshot(dir string) bool {
	ents, _ := os.ReadDir(filepath.Join(dir, "raft", "snapshots"))
	for _, e := range ents {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			return true
		}
	}
	return false
}

func freeAddr(t testing.TB) string { return fmt.Sprintf("127.0.0.1:%d", testutil.Port(t)) }

func TestCrashRestartAppliesNothingTwice(t *testing.T) {
	for _, c := range []struct {
		compact bool
		store   string
	}{{false, cluster.LogStoreBolt}, {true, cluster.LogStoreBolt}, {false, cluster.LogStoreWAL}, {true, cluster.LogStoreWAL}} {
		compact := c.compact
		t.Run(fmt.Sprintf("store=%s/compact=%v", c.store, compact), func(t *testing.T) {
			if testing.Short() {
				t.Skip("spawns a child process")
			}
			dir, addr := t.TempDir(), freeAddr(t)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashEnv+"="+dir, "FLOWD_CRASH_ADDR="+addr, "FLOWD_CRASH_COMPACT="+map[bool]string{true: "1"}[compact], "FLOWD_CRASH_STORE="+c.store)
			stdout, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var committed uint64
			lines := 0
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "ERR") {
					t.Fatal(sc.Text())
				}
				idx, _ := strconv.ParseUint(sc.Text(), 10, 64)
				committed = max(committed, idx)
				// With compaction, stream on (at most 200 000 entries) until
				// a snapshot was persisted, so the crash lands behind one.
				if lines++; lines >= 1500 && (!compact || lines%100 == 0 && hasSnapshot(dir) || lines >= 200000) {
					break
				}
			}
			_ = cmd.Process.Signal(syscall.SIGKILL) // no clean shutdown
			_ = cmd.Wait()
			if lines < 1500 {
				t.Fatalf("child stopped after %d entries", lines)
			}

			// Restart without aggressive snapshots so the log stays put while the
			// test replays it.
			cfg := crashConfig(dir, addr, false, c.store)
			n, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if n.RaftLogStore() != c.store {
				t.Fatalf("restarted on %q, want %q", n.RaftLogStore(), c.store)
			}
			defer n.Shutdown()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := n.WaitForLeader(ctx); err != nil {
				t.Fatal(err)
			}
			_, idx, err := n.Propose(ctx, &fsm.Noop{})
			if err != nil {
				t.Fatal(err)
			}
			if idx <= committed {
				t.Fatalf("new entry %d not after the last acknowledged %d", idx, committed)
			}
			if err := n.WaitForApplied(ctx, idx); err != nil {
				t.Fatal(err)
			}
			got, at, _ := n.FSM().Digest()
			if at != idx {
				t.Fatalf("applied %d, want %d", at, idx)
			}
			want := replayDigest(t, n, idx)
			if got != want {
				t.Fatal("restarted state differs from a replay of snapshot + log: something was applied twice or lost")
			}
			if compact {
				if metas, _ := n.cfg.SnapshotStore.List(); len(metas) == 0 {
					t.Fatal("no snapshot was taken; the compaction case tested nothing")
				}
			}
		})
	}
}

// replayDigest rebuilds the state in a fresh in-memory FSM from the newest
// snapshot (if any) and the log after it, up to index.
func replayDigest(t *testing.T, n *Node, index uint64) string {
	t.Helper()
	fresh, _ := fsm.New(store.NewMemStore(), fsm.Options{})
	start := uint64(1)
	if metas, _ := n.cfg.SnapshotStore.List(); len(metas) > 0 {
		_, rc, err := n.cfg.SnapshotStore.Open(metas[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := fresh.Restore(rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
		start = metas[0].Index + 1
	}
	first, _ := n.cfg.LogStore.FirstIndex()
	if first > start {
		t.Fatalf("log starts at %d, after the snapshot's %d", first, start-1)
	}
	a := &raftFSM{f: fresh}
	for i := start; i <= index; i++ {
		var l raft.Log
		if err := n.cfg.LogStore.GetLog(i, &l); err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
		a.ApplyBatch([]*raft.Log{&l})
	}
	d, _, _ := fresh.Digest()
	return d
}
