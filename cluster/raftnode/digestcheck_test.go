package raftnode

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/store"
	"github.com/flowd/flowd/internal/testing/testutil"
)

func noDigestLoop(c *Config) { c.DigestInterval = -1 }

// A follower whose state was changed behind the FSM's back is found by
// the digest check; the others are not.
func TestDigestCheckFindsADivergedFollower(t *testing.T) {
	c := NewTestCluster(t, 3, noDigestLoop)
	c.Propose(&fsm.QueueSet{Name: "q", Concurrency: 3})
	c.Converged()
	leader := c.Leader()
	bad := c.Followers()[0]
	if err := bad.FSM().Store().Commit([][]store.Write{{{Key: []byte("zz/stray"), Val: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	idx, err := leader.CheckDigest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyTrue(t, 10*time.Second, 5*time.Millisecond, "the damaged follower to notice", func() bool { return bad.Diverged() != "" })
	msg := bad.Health()
	for _, want := range []string{"diverged", "rebuild", "--data-dir"} {
		if !strings.Contains(msg, want) {
			t.Errorf("health %q lacks %q", msg, want)
		}
	}
	c.WaitForApplied(idx + 1)
	for _, n := range c.Nodes {
		if n != bad && n.Health() != "" {
			t.Errorf("%s: healthy node reports %q", n.ID(), n.Health())
		}
	}
}

// Equal replicas pass the check, repeatedly; the marks change no state.
func TestDigestCheckPassesOnEqualReplicas(t *testing.T) {
	c := NewTestCluster(t, 3, noDigestLoop)
	before := c.Converged()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		if _, err := c.Leader().CheckDigest(ctx); err != nil {
			t.Fatal(err)
		}
	}
	after := c.Converged()
	for _, n := range c.Nodes {
		if n.Health() != "" {
			t.Errorf("%s: %s", n.ID(), n.Health())
		}
		if before[n.ID()] == after[n.ID()] {
			continue // the applied index moved, so digests move; equal across nodes is what counts
		}
	}
	var first string
	for _, d := range after {
		if first == "" {
			first = d
		} else if d != first {
			t.Fatalf("digests differ after checks: %v", after)
		}
	}
}

// The leader's loop checks by itself while entries are applied.
func TestDigestLoopRuns(t *testing.T) {
	c := NewTestCluster(t, 3, func(cfg *Config) { cfg.DigestInterval = 20 * time.Millisecond })
	bad := c.Followers()[0]
	if err := bad.FSM().Store().Commit([][]store.Write{{{Key: []byte("zz/stray"), Val: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	c.Propose(&fsm.QueueSet{Name: "q", Concurrency: 1})
	testutil.EventuallyTrue(t, 10*time.Second, 5*time.Millisecond, "the loop's check", func() bool { return bad.Diverged() != "" })
}

// failingStore fails every commit once armed.
type failingStore struct {
	store.Store
	armed atomic.Bool
}

func (s *failingStore) Commit(b [][]store.Write) error {
	if s.armed.Load() {
		return errors.New("no space left on device")
	}
	return s.Store.Commit(b)
}

// A state store that cannot write stops the node (Failed), and it applies
// nothing more; the others go on.
func TestStateStoreFailureStopsTheNode(t *testing.T) {
	stores := map[string]*failingStore{}
	c := NewTestCluster(t, 3, func(cfg *Config) {
		s := &failingStore{Store: store.NewMemStore()}
		stores[cfg.NodeID] = s
		cfg.Store = s
		cfg.DigestInterval = -1
	})
	f := c.Followers()[0]
	stores[f.ID()].armed.Store(true)
	c.Propose(&fsm.QueueSet{Name: "q", Concurrency: 2})
	select {
	case <-f.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("node did not fail")
	}
	if !errors.Is(f.Failure(), cluster.ErrStorageFailed) || !strings.Contains(f.Health(), "no space left") {
		t.Fatalf("failure %v, health %q", f.Failure(), f.Health())
	}
	stores[f.ID()].armed.Store(false)
	_, idx := c.Propose(&fsm.QueueSet{Name: "q", Concurrency: 3})
	for _, n := range c.Nodes {
		if n == f {
			continue
		}
		if err := n.WaitForApplied(context.Background(), idx); err != nil {
			t.Fatal(err)
		}
	}
	if f.FSM().AppliedIndex() >= idx {
		t.Fatalf("a failed node went on applying (at %d)", f.FSM().AppliedIndex())
	}
}

// A data dir deleted under a running node: its next log append fails the
// node instead of being acknowledged, with either raft log store.
func TestDeletedDataDirStopsTheNode(t *testing.T) {
	for _, kind := range []string{cluster.LogStoreBolt, cluster.LogStoreWAL} {
		t.Run(kind, func(t *testing.T) {
			c := NewTestCluster(t, 3, withLogStore(kind, nil))
			f := c.Followers()[0]
			if err := os.RemoveAll(filepath.Dir(filepath.Join(f.cfg.DataDir, "x"))); err != nil {
				t.Fatal(err)
			}
			if f.Health() == "" {
				t.Fatal("health does not notice the data dir is gone")
			}
			c.Propose(&fsm.QueueSet{Name: "q", Concurrency: 2})
			select {
			case <-f.Failed():
			case <-time.After(10 * time.Second):
				t.Fatal("node did not fail")
			}
			if !strings.Contains(f.Failure().Error(), "deleted or replaced") {
				t.Fatalf("failure: %v", f.Failure())
			}
		})
	}
}

func TestDiskGuardFreeSpace(t *testing.T) {
	dir := t.TempDir()
	g, err := newDiskGuard(dir, 1<<62, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.check(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("check: %v", err)
	}
}
