package raftnode

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
)

// gatedLogStore is an in-memory raft log whose appends can be held (the
// next StoreLogs blocks until released) or failed once, and which reports
// every index it stored.
type gatedLogStore struct {
	raft.LogStore
	mu      sync.Mutex
	hold    chan struct{} // non-nil: the next append waits for it to close
	entered chan uint64   // told the last index of a held append
	fail    error         // the next append fails with it
	stored  chan uint64   // told the last index of every append (buffered, lossy)
}

func newGatedLogStore() *gatedLogStore {
	return &gatedLogStore{LogStore: raft.NewInmemStore(), stored: make(chan uint64, 4096)}
}

func (s *gatedLogStore) StoreLogs(logs []*raft.Log) error {
	last := logs[len(logs)-1].Index
	s.mu.Lock()
	hold, entered, fail := s.hold, s.entered, s.fail
	s.hold, s.fail = nil, nil
	s.mu.Unlock()
	if hold != nil {
		entered <- last
		<-hold
	}
	if fail != nil {
		return fail
	}
	if err := s.LogStore.StoreLogs(logs); err != nil {
		return err
	}
	select {
	case s.stored <- last:
	default:
	}
	return nil
}

func (s *gatedLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// holdNext makes the next append wait until release is called (again: a
// no-op), failing it with fail if that is not nil; entered receives its
// last index once it is waiting.
func (s *gatedLogStore) holdNext(fail error) (entered <-chan uint64, release func()) {
	hold, ent := make(chan struct{}), make(chan uint64, 1)
	s.mu.Lock()
	s.hold, s.entered, s.fail = hold, ent, fail
	s.mu.Unlock()
	var once sync.Once
	return ent, func() { once.Do(func() { close(hold) }) }
}

// waitStored waits until the store has appended index (or later).
func (s *gatedLogStore) waitStored(t *testing.T, index uint64) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		if last, _ := s.LogStore.LastIndex(); last >= index {
			return
		}
		select {
		case <-s.stored:
		case <-timeout:
			last, _ := s.LogStore.LastIndex()
			t.Fatalf("the store did not append index %d within 10 s (last %d)", index, last)
		}
	}
}

func gatedCluster(t *testing.T) (*TestCluster, map[string]*gatedLogStore) {
	stores := map[string]*gatedLogStore{}
	var mu sync.Mutex
	c := NewTestCluster(t, 3, func(cfg *Config) {
		mu.Lock()
		defer mu.Unlock()
		s := stores[cfg.NodeID]
		if s == nil {
			s = newGatedLogStore()
			stores[cfg.NodeID] = s
		}
		cfg.LogStore = newByteBoundedLogCache(s, 0)
		cfg.DisableLoops = true // the held append is the test's proposal
	})
	return c, stores
}

// The leader's own append overlaps the followers' (flowd's patch of
// hashicorp/raft, internal/hashicorp-raft): while the leader is still
// writing an entry, both followers already hold it; the leader answers the
// proposal only once its own write returned.
func TestLeaderReplicatesWhileItAppends(t *testing.T) {
	c, stores := gatedCluster(t)
	l := c.Leader()
	_, base := c.Propose(&fsm.Noop{}) // settle the new term's entries

	entered, release := stores[l.ID()].holdNext(nil)
	defer release()
	type out struct {
		idx uint64
		err error
	}
	done := make(chan out, 1)
	go func() {
		_, idx, err := l.Propose(context.Background(), &fsm.Noop{})
		done <- out{idx, err}
	}()
	var idx uint64
	select {
	case idx = <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader never appended the proposal")
	}
	if idx <= base {
		t.Fatalf("held append ends at %d, not after %d", idx, base)
	}
	for _, f := range c.Followers() {
		stores[f.ID()].waitStored(t, idx) // fails on a raft that appends first
	}
	select {
	case o := <-done:
		t.Fatalf("proposal answered (index %d, %v) before the leader's own append returned", o.idx, o.err)
	default:
	}
	release()
	o := <-done
	if o.err != nil || o.idx <= base || o.idx > idx {
		t.Fatalf("proposal: index %d, %v; want an index in the held batch (%d, %d]", o.idx, o.err, base, idx)
	}
	c.WaitForApplied(idx)
}

// A leader whose own append fails answers "outcome unknown" (the followers
// may hold the entry and the next leader commit it), steps down, and the
// entry is then applied everywhere exactly once; the cache serves nothing
// the failed leader does not hold.
func TestLeaderAppendFailureIsOutcomeUnknown(t *testing.T) {
	c, stores := gatedCluster(t)
	l := c.Leader()
	c.Propose(&fsm.Noop{})

	entered, release := stores[l.ID()].holdNext(errors.New("disk refused the append"))
	defer release()
	done := make(chan error, 1)
	go func() {
		_, _, err := l.Propose(context.Background(), &fsm.Submit{ID: "run-after-failed-append", Spec: mustSpec(t, diamond)})
		done <- err
	}()
	var idx uint64
	select {
	case idx = <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader never appended the proposal")
	}
	for _, f := range c.Followers() {
		stores[f.ID()].waitStored(t, idx)
	}
	release()
	err := <-done
	if !errors.Is(err, cluster.ErrLeadershipLost) {
		t.Fatalf("proposal after a failed leader append: %v; want the outcome-unknown leadership loss", err)
	}
	// The entry the followers hold commits under the next leader and
	// reaches every node, the old leader included.
	_, after := c.Propose(&fsm.Noop{})
	if after <= idx {
		t.Fatalf("next entry at %d, not after the failed one at %d", after, idx)
	}
	c.WaitForApplied(after)
	for _, n := range c.Nodes {
		var got raft.Log
		if err := n.cfg.LogStore.GetLog(idx, &got); err != nil {
			t.Fatalf("%s: entry %d: %v", n.ID(), idx, err)
		}
	}
	digests := c.Converged()
	var first string
	for id, d := range digests {
		if first == "" {
			first = d
		} else if d != first {
			t.Fatalf("replicas diverged after a failed leader append: %s has %s, want %s", id, d, first)
		}
	}
}

// A staged batch is readable before it is stored, whatever its size, and
// no longer once it is unstaged; storing it moves it into the ring.
func TestLogCacheServesTheStagedBatch(t *testing.T) {
	store := raft.NewInmemStore()
	c := newByteBoundedLogCache(store, 1<<20)
	batch := []*raft.Log{
		{Index: 1, Term: 1, Data: []byte("a")},
		{Index: 2, Term: 1, Data: bytes.Repeat([]byte{2}, 2<<20)}, // over the budget
		{Index: 3, Term: 1, Data: []byte("c")},
	}
	c.StageLogs(batch)
	for _, want := range batch {
		var l raft.Log
		if err := c.GetLog(want.Index, &l); err != nil || !bytes.Equal(l.Data, want.Data) {
			t.Fatalf("staged entry %d: %v", want.Index, err)
		}
	}
	c.UnstageLogs(batch)
	var l raft.Log
	if err := c.GetLog(2, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("unstaged entry 2: %v, want ErrLogNotFound", err)
	}
	c.StageLogs(batch)
	if err := c.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
	if c.staged != nil {
		t.Fatal("the stored batch is still held as staged")
	}
	for _, want := range batch {
		if err := c.GetLog(want.Index, &l); err != nil || !bytes.Equal(l.Data, want.Data) {
			t.Fatalf("stored entry %d: %v", want.Index, err)
		}
	}
	if c.cachedBytes() > 1<<20 {
		t.Fatalf("cache holds %d bytes with a 1 MiB budget", c.cachedBytes())
	}
}
