package raftnode

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	autopilot "github.com/hashicorp/raft-autopilot"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/cluster"
)

// Autopilot: server health and dead-server cleanup on the leader, by
// hashicorp/raft-autopilot (Consul's and Nomad's). The library decides;
// this file feeds it: the configuration's servers, whether each is alive
// (it answered the member probe lately), and each one's raft stats, which
// the consumer (the daemon, over its forwarding port) fetches through a
// MemberProber. With CleanupDeadServers a voter that has not answered for
// DeadServerAfter is removed, but never below MinQuorum voters and never a
// majority at once (the library's rules): in a three-node cluster with
// MinQuorum 3, a dead node is removed once its replacement joins.

// apDelegate implements autopilot.ApplicationIntegration for a node.
type apDelegate struct {
	n      *Node
	cfg    autopilot.Config
	prober cluster.MemberProber
	dead   time.Duration

	mu       sync.Mutex
	lastSeen map[string]time.Time
	// known is when this leader first saw each server in the
	// configuration: a server added since gets DeadServerAfter from then to
	// answer before it can be judged dead.
	known map[string]time.Time
	since time.Time // when this node started asking (a leader's term)
	state *cluster.AutopilotState
}

// StartAutopilot runs autopilot on this node while it leads. Call it once
// (right after New); a term that began before starts it then.
func (n *Node) StartAutopilot(p cluster.MemberProber, c cluster.AutopilotConfig) {
	if c.LastContactThreshold == 0 {
		c.LastContactThreshold = max(time.Second, 4*n.cfg.HeartbeatTimeout)
	}
	if c.MaxTrailingLogs == 0 {
		c.MaxTrailingLogs = 1000
	}
	if c.MinQuorum == 0 {
		c.MinQuorum = uint(max(len(n.cfg.Peers), 1))
	}
	if c.ServerStabilizationTime == 0 {
		c.ServerStabilizationTime = 10 * time.Second
	}
	if c.DeadServerAfter == 0 {
		c.DeadServerAfter = 30 * time.Second
	}
	d := &apDelegate{n: n, prober: p, dead: c.DeadServerAfter, lastSeen: map[string]time.Time{}, known: map[string]time.Time{},
		cfg: autopilot.Config{CleanupDeadServers: c.CleanupDeadServers, LastContactThreshold: c.LastContactThreshold,
			MaxTrailingLogs: c.MaxTrailingLogs, MinQuorum: c.MinQuorum, ServerStabilizationTime: c.ServerStabilizationTime}}
	n.mu.Lock()
	n.ap = autopilot.New(n.raft, d, autopilot.WithLogger(NewHCLogger(n.log, "autopilot")),
		autopilot.WithUpdateInterval(time.Second), autopilot.WithReconcileInterval(5*time.Second))
	n.apd = d
	n.mu.Unlock()
	close(n.apSet)
}

// AutopilotState returns autopilot's latest view, or nil when this node
// does not lead (or autopilot is off).
func (n *Node) AutopilotState() *cluster.AutopilotState {
	n.mu.Lock()
	d := n.apd
	n.mu.Unlock()
	if d == nil || !n.IsLeader() {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state
}

// autopilotLoop runs autopilot for one term of leadership (leader.go).
func (n *Node) autopilotLoop(ctx context.Context) {
	select { // a term may begin before the daemon starts autopilot
	case <-n.apSet:
	case <-ctx.Done():
		return
	}
	n.mu.Lock()
	ap, d := n.ap, n.apd
	n.mu.Unlock()
	if ap == nil {
		return
	}
	d.mu.Lock()
	d.since, d.lastSeen, d.known, d.state = time.Now(), map[string]time.Time{}, map[string]time.Time{}, nil
	d.mu.Unlock()
	ap.Start(ctx)
	<-ctx.Done()
	<-ap.Stop()
}

func (d *apDelegate) AutopilotConfig() *autopilot.Config { c := d.cfg; return &c }

func (d *apDelegate) NotifyState(s *autopilot.State) {
	out := &cluster.AutopilotState{Healthy: s.Healthy, FailureTolerance: s.FailureTolerance, Leader: string(s.Leader)}
	for _, id := range sortedIDs(s.Servers) {
		ss := s.Servers[id]
		out.Servers = append(out.Servers, cluster.AutopilotServer{ID: string(id), Address: string(ss.Server.Address),
			Status: string(ss.Server.NodeStatus), Voter: ss.HasVotingRights(), Leader: ss.State == autopilot.RaftLeader,
			Healthy: ss.Health.Healthy, StableSince: ss.Health.StableSince, LastContact: ss.Stats.LastContact,
			LastTerm: ss.Stats.LastTerm, LastIndex: ss.Stats.LastIndex})
	}
	d.mu.Lock()
	d.state = out
	d.mu.Unlock()
}

func sortedIDs(m map[raft.ServerID]*autopilot.ServerState) []raft.ServerID {
	return slices.Sorted(maps.Keys(m))
}

func (d *apDelegate) FetchServerStats(ctx context.Context, servers map[raft.ServerID]*autopilot.Server) map[raft.ServerID]*autopilot.ServerStats {
	var ps []cluster.PeerStatus
	for id, s := range servers {
		ps = append(ps, cluster.PeerStatus{ID: string(id), Address: string(s.Address)})
	}
	got := d.prober.ProbeMembers(ctx, ps)
	now := time.Now()
	out := make(map[raft.ServerID]*autopilot.ServerStats, len(got))
	d.mu.Lock()
	for id, st := range got {
		d.lastSeen[id] = now
		out[raft.ServerID(id)] = &autopilot.ServerStats{LastTerm: st.LastTerm, LastIndex: st.LastIndex, LastContact: st.LastContact}
	}
	d.mu.Unlock()
	return out
}

// KnownServers is the raft configuration, each server's status as
// statusLocked judges it (this node always alive).
func (d *apDelegate) KnownServers() map[raft.ServerID]*autopilot.Server {
	leader, _ := d.n.Leader()
	now := time.Now()
	out := map[raft.ServerID]*autopilot.Server{}
	d.mu.Lock()
	defer d.mu.Unlock()
	servers := d.n.Servers()
	inConfig := make(map[string]bool, len(servers))
	for _, s := range servers {
		inConfig[s.ID] = true
		st := autopilot.NodeAlive
		if s.ID != d.n.cfg.NodeID {
			st = d.statusLocked(s.ID, now)
		}
		out[raft.ServerID(s.ID)] = &autopilot.Server{ID: raft.ServerID(s.ID), Name: s.ID, Address: raft.ServerAddress(s.Address),
			NodeStatus: st, IsLeader: s.ID == leader, NodeType: autopilot.NodeVoter}
	}
	for id := range d.known { // a server removed and added again starts anew
		if !inConfig[id] {
			delete(d.known, id)
		}
	}
	return out
}

// statusLocked judges a server of the configuration (d.mu held): alive if
// it answered the member probe within DeadServerAfter; failed if it has
// not, and both this leader's term and the server's membership (as this
// leader first saw it) are older than that; unknown otherwise. A server
// just added has not answered yet (it is still being sent a snapshot, or
// starting): judged by the term's age alone it was failed at once, and
// autopilot removed it right after it joined.
func (d *apDelegate) statusLocked(id string, now time.Time) autopilot.NodeStatus {
	first, ok := d.known[id]
	if !ok {
		first = now
		d.known[id] = now
	}
	if seen, ok := d.lastSeen[id]; ok && now.Sub(seen) <= d.dead {
		return autopilot.NodeAlive
	}
	if now.Sub(d.since) > d.dead && now.Sub(first) > d.dead {
		return autopilot.NodeFailed
	}
	return autopilot.NodeUnknown
}

// RemoveFailedServer removes a server autopilot judged dead (it checked
// quorum and MinQuorum first).
func (d *apDelegate) RemoveFailedServer(s *autopilot.Server) {
	d.n.log.Warn("autopilot: removing a dead server", "id", s.ID, "address", s.Address)
	go func() {
		if err := d.n.RemoveServer(string(s.ID)); err != nil {
			d.n.log.Warn("autopilot: remove dead server", "id", s.ID, "err", err)
		}
	}()
}

// LocalStats is this node's own MemberStats.
func (n *Node) LocalStats() cluster.MemberStats {
	st := n.raft.Stats()
	s := cluster.MemberStats{LastTerm: parseU(st["last_log_term"]), LastIndex: parseU(st["last_log_index"])}
	if n.raft.State() != raft.Leader {
		s.LastContact = time.Since(n.raft.LastContact())
	}
	return s
}
