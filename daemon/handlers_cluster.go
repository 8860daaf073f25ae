package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/rpc"
)

// Cluster, operator and snapshot methods.

func (a *Agent) peers() []rpc.Peer {
	leader, _ := a.prop.Leader()
	var out []rpc.Peer
	for _, s := range a.prop.Servers() {
		st := "follower"
		if s.ID == leader {
			st = "leader"
		}
		out = append(out, rpc.Peer{ID: s.ID, Address: s.Address, Suffrage: strings.ToLower(s.Suffrage), State: st})
	}
	return out
}

func (a *Agent) clusterStatus(context.Context, struct{}) (rpc.ClusterStatus, error) {
	s := a.node.Status()
	return rpc.ClusterStatus{NodeID: s.NodeID, LeaderID: s.LeaderID, State: strings.ToLower(s.State), Term: s.Term,
		CommitIndex: s.CommitIndex, AppliedIndex: s.AppliedIndex, LastContact: s.LastContact,
		Peers: a.peers(), Version: a.cfg.Version, PID: os.Getpid()}, nil
}

func (a *Agent) clusterStats(context.Context, struct{}) (rpc.ClusterStats, error) {
	counts, err := a.state.CountRuns()
	if err != nil {
		return rpc.ClusterStats{}, err
	}
	qs, err := a.state.Queues()
	if err != nil {
		return rpc.ClusterStats{}, err
	}
	c, err := a.state.Counters()
	if err != nil {
		return rpc.ClusterStats{}, err
	}
	out := rpc.ClusterStats{Runs: countsOf(counts), Queues: map[string]int{}, TasksPerSecond: a.rate.perSecond(),
		LeaseExpiries: c.LeaseExpiries, TasksDone: c.TasksDone, AppliedIndex: a.state.AppliedIndex()}
	for _, q := range qs {
		out.Queues[q.Name] = q.Ready
		out.Running += q.Running
	}
	return out, nil
}

func (a *Agent) clusterDigest(context.Context, struct{}) (rpc.DigestResult, error) {
	d, idx, err := a.state.Digest()
	return rpc.DigestResult{Digest: d, AppliedIndex: idx}, err
}

func (a *Agent) raftPeers(context.Context, struct{}) (rpc.PeersResult, error) {
	return rpc.PeersResult{Peers: a.peers()}, nil
}

func (a *Agent) raftAddPeer(ctx context.Context, p rpc.PeerParams) (rpc.OK, error) {
	if p.ID == "" || p.Address == "" {
		return rpc.OK{}, invalid("id and address are required")
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodRaftAddPeer, p, func(context.Context) (rpc.OK, error) {
		return rpc.OK{OK: true}, a.node.AddVoter(p.ID, p.Address)
	})
}

func (a *Agent) raftRemovePeer(ctx context.Context, p rpc.PeerParams) (rpc.OK, error) {
	if p.ID == "" {
		return rpc.OK{}, invalid("id is required")
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodRaftRemovePeer, p, func(context.Context) (rpc.OK, error) {
		return rpc.OK{OK: true}, a.node.RemoveServer(p.ID)
	})
}

func (a *Agent) raftTransfer(ctx context.Context, p rpc.PeerParams) (rpc.OK, error) {
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodRaftTransfer, p, func(context.Context) (rpc.OK, error) {
		return rpc.OK{OK: true}, a.node.TransferLeadership(p.ID)
	})
}

func checkPath(p string) error {
	if p == "" || !filepath.IsAbs(p) {
		return invalid("path %q must be an absolute path on the agent's machine", p)
	}
	return nil
}

// snapshotSave writes this node's state, as of its applied index, to a
// file on the agent's machine.
func (a *Agent) snapshotSave(_ context.Context, p rpc.SnapshotParams) (rpc.SnapshotResult, error) {
	if err := checkPath(p.Path); err != nil {
		return rpc.SnapshotResult{}, err
	}
	snap, err := a.state.Snapshot()
	if err != nil {
		return rpc.SnapshotResult{}, err
	}
	defer snap.Release()
	tmp := p.Path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return rpc.SnapshotResult{}, invalid("create %s: %v", tmp, err)
	}
	n, err := snap.WriteTo(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p.Path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return rpc.SnapshotResult{}, fmt.Errorf("write snapshot: %w", err)
	}
	return rpc.SnapshotResult{Path: p.Path, Bytes: n, AppliedIndex: snap.Index}, nil
}

// snapshotRestore installs a snapshot file as the whole cluster's state
// (raft user restore). It runs on the leader and reads the file on the
// leader's machine; everything applied since is replaced.
func (a *Agent) snapshotRestore(ctx context.Context, p rpc.SnapshotParams) (rpc.SnapshotResult, error) {
	if err := checkPath(p.Path); err != nil {
		return rpc.SnapshotResult{}, err
	}
	ctx, cancel := withTimeout(ctx, time.Minute)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodSnapshotRest, p, func(context.Context) (rpc.SnapshotResult, error) {
		f, err := os.Open(p.Path)
		if err != nil {
			return rpc.SnapshotResult{}, invalid("open %s on the leader (%s): %v", p.Path, a.cfg.NodeID, err)
		}
		defer f.Close()
		// Validate before touching the cluster.
		if err := fsm.ReadSnapshot(f, func(k, v []byte) error { return nil }); err != nil {
			return rpc.SnapshotResult{}, invalid("%s: %v", p.Path, err)
		}
		if _, err := f.Seek(0, 0); err != nil {
			return rpc.SnapshotResult{}, err
		}
		st, _ := f.Stat()
		if !a.node.IsLeader() {
			return rpc.SnapshotResult{}, a.node.Barrier(ctx) // returns NotLeaderError
		}
		meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: st.Size()}
		if err := a.node.Raft().Restore(meta, f, time.Minute); err != nil {
			return rpc.SnapshotResult{}, fmt.Errorf("restore: %w", err)
		}
		// The restore is itself a log position: a barrier makes the FSM
		// report the cluster's index, not the snapshot file's.
		if err := a.node.Barrier(ctx); err != nil {
			return rpc.SnapshotResult{}, err
		}
		return rpc.SnapshotResult{Path: p.Path, Bytes: st.Size(), AppliedIndex: a.state.AppliedIndex()}, nil
	})
}
