package raftnode

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm/domain"
)

// Status reports raft state, indexes and the configuration.
func (n *Node) Status() cluster.Status {
	st := n.raft.Stats()
	id, addr := n.Leader()
	s := cluster.Status{
		NodeID: n.cfg.NodeID, LeaderID: id, LeaderAddr: addr,
		State:        n.raft.State().String(),
		Term:         parseU(st["term"]),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.fsm.AppliedIndex(),
		LastContact:  st["last_contact"],
	}
	if s.State == "Leader" {
		s.LastContact = "0"
	}
	s.Peers = append(s.Peers, n.Servers()...)
	return s
}

func parseU(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}

// Servers lists the latest raft configuration.
func (n *Node) Servers() []cluster.PeerStatus {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []cluster.PeerStatus
	for _, srv := range f.Configuration().Servers {
		out = append(out, cluster.PeerStatus{ID: string(srv.ID), Address: string(srv.Address), Suffrage: srv.Suffrage.String()})
	}
	return out
}

// AddVoter adds a server. It is idempotent: if the id and address are
// already members nothing happens; if only one of them matches, the stale
// entry is removed first. Only the leader can change membership.
func (n *Node) AddVoter(id, addr string) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, srv := range f.Configuration().Servers {
		sameID, sameAddr := srv.ID == raft.ServerID(id), srv.Address == raft.ServerAddress(addr)
		if sameID && sameAddr {
			return nil
		}
		if sameID || sameAddr {
			if err := n.raft.RemoveServer(srv.ID, 0, 10*time.Second).Error(); err != nil {
				return changeErr(fmt.Errorf("remove stale member %s: %w", srv.ID, err))
			}
		}
	}
	return changeErr(n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 10*time.Second).Error())
}

// changeErr makes a membership change that lost its leader before it
// committed retryable (-32004): AddVoter is idempotent, so the caller's
// retry on the next leader finishes it or finds it done. A new voter that
// is not up yet, or still catching up, costs a one- or two-node cluster its
// quorum (the change commits under the new configuration), so the leader
// can step down until the newcomer answers.
func changeErr(err error) error {
	if errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		return &domain.UnavailableError{Reason: "the membership change did not commit before leadership changed (a new voter that is not up or not caught up yet can cost a small cluster its quorum until it is); repeating it is safe: " + err.Error(), RetryAfter: 500 * time.Millisecond}
	}
	return err
}

// RemoveServer removes a member by id.
func (n *Node) RemoveServer(id string) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	for _, srv := range n.Servers() {
		if srv.ID == id {
			return n.raft.RemoveServer(raft.ServerID(id), 0, 10*time.Second).Error()
		}
	}
	return fmt.Errorf("%w: no member %q; run `flowd operator raft list-peers`", domain.ErrNotFound, id)
}

// TransferLeadership hands leadership to id (or to the most up-to-date
// follower when id is empty). Used for graceful stops: it takes
// milliseconds, where an election after a crash takes about a second.
// A transfer to the leader itself succeeds at once: it already leads.
func (n *Node) TransferLeadership(id string) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	if id == "" {
		return n.raft.LeadershipTransfer().Error()
	}
	if id == n.ID() {
		// Asked to make the leader lead: that holds already (raft would
		// answer "cannot transfer leadership to itself", which a caller
		// that picked the target a moment before an election cannot avoid).
		n.log.Info("leadership transfer to the current leader: nothing to do", "id", id)
		return nil
	}
	for _, srv := range n.Servers() {
		if srv.ID == id {
			return n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(srv.Address)).Error()
		}
	}
	return fmt.Errorf("%w: no member %q; run `flowd operator raft list-peers`", domain.ErrNotFound, id)
}

// Snapshot forces a raft snapshot now (log compaction).
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// LeaderChanges counts the times this node took office as leader.
func (n *Node) LeaderChanges() uint64 { return n.leaderChanges.Load() }

// RestoreSnapshot replaces the cluster's state with the snapshot in r
// (size bytes, written at index in the cluster it came from): raft
// installs it on every member and puts it past index in the log. Leader
// only.
func (n *Node) RestoreSnapshot(r io.Reader, size int64, index uint64, timeout time.Duration) error {
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: size, Index: index}
	return n.raft.Restore(meta, r, timeout)
}
