package daemon

import (
	"context"
	"os"
	"strings"

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
		Peers: a.peers(), Version: a.cfg.Version, PID: os.Getpid(), FSMVersion: a.fsmVersion()}, nil
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

// raftPeers lists the configuration with what each member reports of its
// release and state-machine versions (asked in parallel, a second at most).
func (a *Agent) raftPeers(ctx context.Context, _ struct{}) (rpc.PeersResult, error) {
	peers := a.peers()
	members := a.memberVersions(ctx)
	for i := range peers {
		for j := range members {
			if members[j].ID == peers[i].ID {
				peers[i].Member = &members[j]
			}
		}
	}
	return rpc.PeersResult{Peers: peers}, nil
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
