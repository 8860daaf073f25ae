package raftnode

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
)

// TestCluster is an in-process cluster for tests: real raft, real badger and
// bolt stores in temp dirs, connected by raft's in-memory transport so tests
// can partition and heal nodes without sockets or sleeps.
type TestCluster struct {
	t     testing.TB
	Nodes []*Node
	trans []*raft.InmemTransport
	addrs []raft.ServerAddress
	dirs  []string
	cfgFn func(*Config)
	cut   map[int]bool
}

// NewTestCluster starts n nodes with fast timeouts and waits for a leader.
// opt may adjust each node's config (e.g. DisableLoops, Clock).
func NewTestCluster(t testing.TB, n int, opt func(*Config)) *TestCluster {
	t.Helper()
	c := &TestCluster{t: t, cfgFn: opt, cut: map[int]bool{}}
	base := t.TempDir()
	var peers []cluster.Peer
	for i := 0; i < n; i++ {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("node%d", i+1)))
		c.trans = append(c.trans, tr)
		c.addrs = append(c.addrs, addr)
		c.dirs = append(c.dirs, filepath.Join(base, fmt.Sprintf("n%d", i+1)))
		peers = append(peers, cluster.Peer{ID: fmt.Sprintf("n%d", i+1), Address: string(addr)})
	}
	c.connectAll()
	for i := 0; i < n; i++ {
		node, err := New(c.config(i, peers))
		if err != nil {
			t.Fatalf("start node %d: %v", i+1, err)
		}
		c.Nodes = append(c.Nodes, node)
	}
	t.Cleanup(c.Shutdown)
	c.Leader()
	return c
}

func (c *TestCluster) config(i int, peers []cluster.Peer) Config {
	cfg := Config{Config: cluster.Config{
		NodeID: fmt.Sprintf("n%d", i+1), DataDir: c.dirs[i], Peers: peers,
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
	}, Transport: c.trans[i]}
	if c.cfgFn != nil {
		c.cfgFn(&cfg)
	}
	return cfg
}

func (c *TestCluster) connectAll() {
	for i, a := range c.trans {
		for j, b := range c.trans {
			if i != j && !c.cut[i] && !c.cut[j] {
				a.Connect(c.addrs[j], b)
			}
		}
	}
}

// Leader waits (up to 10 s) for a node that is leader and returns it.
func (c *TestCluster) Leader() *Node {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		for i, n := range c.Nodes {
			if n == nil || c.cut[i] {
				continue
			}
			if _, err := n.WaitForLeader(ctx); err != nil {
				continue
			}
			for j, m := range c.Nodes {
				if m != nil && !c.cut[j] && m.IsLeader() {
					return m
				}
			}
			// The known leader is cut off or stepping down: wait for the next
			// leadership change and look again.
			n.waitLeaderChange(ctx)
		}
	}
	c.t.Fatal("no leader within 10s")
	return nil
}

// waitLeaderChange blocks until a leader observation or ctx ends.
func (n *Node) waitLeaderChange(ctx context.Context) {
	ch := make(chan raft.Observation, 1)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	select {
	case <-ch:
	case <-ctx.Done():
	case <-time.After(200 * time.Millisecond):
	}
}

// Followers returns the live nodes that are not the leader.
func (c *TestCluster) Followers() []*Node {
	l := c.Leader()
	var out []*Node
	for _, n := range c.Nodes {
		if n != nil && n != l {
			out = append(out, n)
		}
	}
	return out
}

// Index returns the position of n in Nodes.
func (c *TestCluster) Index(n *Node) int {
	for i, m := range c.Nodes {
		if m == n {
			return i
		}
	}
	return -1
}

// Partition cuts the given nodes off from every other node (and each
// other), like a network partition.
func (c *TestCluster) Partition(nodes ...*Node) {
	for _, n := range nodes {
		i := c.Index(n)
		c.cut[i] = true
		c.trans[i].DisconnectAll()
		for j, tr := range c.trans {
			if j != i {
				tr.Disconnect(c.addrs[i])
			}
		}
	}
}

// Heal reconnects every node.
func (c *TestCluster) Heal() {
	c.cut = map[int]bool{}
	c.connectAll()
}

// Kill stops node i (raft shut down, stores closed) and leaves its slot
// nil; Restart brings it back from its data dir.
func (c *TestCluster) Kill(n *Node) int {
	i := c.Index(n)
	_ = n.Shutdown()
	for j, tr := range c.trans {
		if j != i {
			tr.Disconnect(c.addrs[i])
		}
	}
	c.Nodes[i] = nil
	return i
}

// Restart starts node i again from its data dir.
func (c *TestCluster) Restart(i int) *Node {
	c.t.Helper()
	addr, tr := raft.NewInmemTransport(c.addrs[i])
	c.trans[i] = tr
	_ = addr
	c.connectAll()
	var peers []cluster.Peer
	for j := range c.addrs {
		peers = append(peers, cluster.Peer{ID: fmt.Sprintf("n%d", j+1), Address: string(c.addrs[j])})
	}
	n, err := New(c.config(i, peers))
	if err != nil {
		c.t.Fatalf("restart node %d: %v", i+1, err)
	}
	c.Nodes[i] = n
	return n
}

// Propose proposes through the current leader, retrying across elections.
func (c *TestCluster) Propose(cmd fsm.Command) (any, uint64) {
	c.t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		l := c.Leader()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, idx, err := l.Propose(ctx, cmd)
		cancel()
		if err == nil {
			return res, idx
		}
		if _, isNotLeader := err.(*cluster.NotLeaderError); !isNotLeader && idx != 0 {
			c.t.Fatalf("propose %s: %v", cmd.Type(), err)
		}
		l.waitLeaderChange(context.Background())
	}
	c.t.Fatalf("propose %s: no leader accepted it", cmd.Type())
	return nil, 0
}

// WaitForApplied waits until every live, connected node applied index.
func (c *TestCluster) WaitForApplied(index uint64) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, n := range c.Nodes {
		if n == nil || c.cut[i] {
			continue
		}
		if err := n.WaitForApplied(ctx, index); err != nil {
			c.t.Fatalf("node %s: %v", n.ID(), err)
		}
	}
}

// Converged waits until every live node has applied the same last index
// and returns each node's digest at that index (equal, unless the replicas
// diverged). Leader loops may append entries meanwhile; it retries then.
func (c *TestCluster) Converged() map[string]string {
	c.t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		_, idx := c.Propose(&fsm.Noop{})
		c.WaitForApplied(idx)
		out := map[string]string{}
		same := true
		for _, n := range c.Nodes {
			if n == nil {
				continue
			}
			d, at, err := n.FSM().Digest()
			if err != nil {
				c.t.Fatal(err)
			}
			if at != idx {
				same = false
				break
			}
			out[n.ID()] = d
		}
		if same {
			return out
		}
	}
	c.t.Fatal("nodes never settled on one applied index")
	return nil
}

// Shutdown stops every node.
func (c *TestCluster) Shutdown() {
	for _, n := range c.Nodes {
		if n != nil {
			_ = n.Shutdown()
		}
	}
}
