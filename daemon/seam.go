package daemon

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
)

// The seam between the agent and the cluster (see DESIGN.md, "The seam").
// daemon never names the raft implementation: it reaches the node and its
// state only through the interfaces below, defined here, where they are
// used, each kept to what one consumer calls (rqlite's proxy.Store,
// hraftd's httpd.Store). The composition root (cmd/flowd's agent command,
// testagents, the daemon's own test helpers) opens a cluster/raftnode.Node
// through Config.OpenNode; tests of the handlers wire a one-node test
// cluster or a fake instead (seam_test.go). The vocabulary the interfaces
// speak (cluster.Status, cluster.PeerStatus, cluster.NotLeaderError, ...) is
// package cluster, which does not import raft.

// Node is everything the agent asks of its cluster member: proposals and
// leadership (proposer), the operator methods (operator), its lifecycle and
// its counters. cluster/raftnode's *Node satisfies it.
type Node interface {
	proposer
	operator
	nodeLifecycle
	nodeMetrics
}

// OpenNodeFunc opens the node New runs on, from the cluster configuration
// New derives from Config (its listeners are bound by then).
type OpenNodeFunc func(cluster.Config) (Node, error)

// NodeOpener adapts a constructor of a concrete node type (raftnode.Open)
// to an OpenNodeFunc; a failed open gives no node (never an interface
// holding a nil pointer).
func NodeOpener[N Node](open func(cluster.Config) (N, error)) OpenNodeFunc {
	return func(c cluster.Config) (Node, error) {
		n, err := open(c)
		if err != nil {
			return nil, err
		}
		return n, nil
	}
}

// leadership is what the leader proxy needs from the node: who leads and
// where it listens, and the waits around a change of leader and around
// applying an index. Every method is safe for concurrent use.
type leadership interface {
	// IsLeader reports whether this node is the raft leader.
	IsLeader() bool
	// Leader returns the leader's id and raft address ("" if none).
	Leader() (id, raftAddr string)
	// NodeMeta returns the metadata a node published (its forwarding
	// address under "forward"), or nil.
	NodeMeta(id string) map[string]string
	// Servers lists the raft configuration.
	Servers() []cluster.PeerStatus
	// WaitLeaderReady blocks until this node leads with every earlier
	// term's entries applied; *cluster.NotLeaderError if it does not lead.
	WaitLeaderReady(ctx context.Context) error
	// WaitLeaderChange blocks until the leader changes, ctx ends or max
	// passes.
	WaitLeaderChange(ctx context.Context, max time.Duration)
	// LeaderEpoch is cancelled at the next leadership change.
	LeaderEpoch() context.Context
	// WaitForApplied blocks until index is applied locally or ctx ends.
	WaitForApplied(ctx context.Context, index uint64) error
}

// proposer is what handlers need from the node: proposals, the long-poll
// claim, the read barrier, and leadership. Propose and ProposeGrouped
// return the FSM's result and the entry's index, an error result of Apply
// as the error (still with the index), and *cluster.NotLeaderError on a
// follower without proposing. Handlers do not look at the untyped result
// themselves: they go through propose.
type proposer interface {
	leadership
	// Propose replicates cmd as an entry of its own.
	Propose(ctx context.Context, cmd fsm.Command) (any, uint64, error)
	// ProposeGrouped replicates cmd through the group commit: it may share
	// an entry with concurrent proposals.
	ProposeGrouped(ctx context.Context, cmd fsm.Command) (any, uint64, error)
	// Claim long-polls (on the leader) for up to w.Max tasks until ctx
	// ends, empty if none came; grace bounds the wait for a claim entry
	// still in flight when ctx ends. A re-sent request id is answered the
	// leases it already holds.
	Claim(ctx context.Context, w fsm.Waiter, grace time.Duration) ([]fsm.Claimed, error)
	// Barrier waits until every entry committed before it is applied
	// locally (leader only).
	Barrier(ctx context.Context) error
}

// operator is what the operator methods need from the node beyond
// proposer: raft's state, membership changes, a user's snapshot restore,
// and autopilot's view (handlers_cluster.go, handlers_snapshot.go,
// autopilot.go, upgrade.go). Membership changes and the restore fail with
// *cluster.NotLeaderError on a follower. Quorum-loss recovery is offline
// (the data dir of a stopped agent), so it is no method of a running node.
type operator interface {
	// Status reports raft's state, term, indexes and configuration.
	Status() cluster.Status
	// AddVoter adds (idempotently) a voter; RemoveServer removes one.
	AddVoter(id, addr string) error
	RemoveServer(id string) error
	// TransferLeadership hands leadership to id ("" lets raft pick).
	TransferLeadership(id string) error
	// RestoreSnapshot replaces the cluster's state with the snapshot r
	// holds (size bytes, taken at index), within timeout.
	RestoreSnapshot(r io.Reader, size int64, index uint64, timeout time.Duration) error
	// AutopilotState is autopilot's latest view (nil: not the leader, or
	// none yet).
	AutopilotState() *cluster.AutopilotState
	// LocalStats is this node's raft log position and last contact.
	LocalStats() cluster.MemberStats
}

// nodeLifecycle is what New, Run and Shutdown, /readyz and the health gate
// need from the node.
type nodeLifecycle interface {
	// FSM is the node's replicated state.
	FSM() *fsm.FSM
	// StartAutopilot runs autopilot while this node leads, asking p for
	// the members' stats.
	StartAutopilot(p cluster.MemberProber, c cluster.AutopilotConfig)
	// Health is why the node must not serve (storage failed, data dir
	// gone, disk full, state diverged), or ""; it checks the disk.
	Health() string
	// Serving is Health without the disk check: what every call asks.
	Serving() string
	// Failed is closed when local storage failed; Failure says why.
	Failed() <-chan struct{}
	Failure() error
	// Stopped is closed when the node stopped.
	Stopped() <-chan struct{}
	Shutdown() error
}

// nodeMetrics is the node's counters on /metrics.
type nodeMetrics interface {
	LeaderChanges() uint64
	WaitingClaims() int
	GroupCommit() cluster.GroupCommitStats
	ThrottledDispatches() uint64
}

// The replicated state as this node has applied it (see fsm.FSM for each
// method's contract) is read through interfaces declared beside their
// consumers: runReader (handlers_run.go), eventReader (handlers_events.go),
// claimReader (handlers_task.go), queueReader (handlers_queue.go),
// statsReader (metrics.go: metrics, cluster.stats, upgrades) and
// snapshotReader (handlers_snapshot.go); what they all share is
// appliedView. Every method is safe for concurrent use with Apply.

// appliedView is where this node's state is, its clock and its limits:
// what the read fence, the long polls and the event streams wait on, and
// what every handler checks against.
type appliedView interface {
	// AppliedIndex is the last index applied to this node's state.
	AppliedIndex() uint64
	// Changed returns a channel closed at the next commit (take it before
	// reading, then wait on it).
	Changed() <-chan struct{}
	// Now is the FSM clock: the largest leader stamp applied (ms).
	Now() int64
	// Limits are the replicated limits (spec sizes, fan-out, ...).
	Limits() domain.Limits
}

// stateReader is the readers together: what an agent is wired with (one
// state), and what a fake embeds for the methods it does not answer. The
// reads not every fake needs (ACL tokens, definitions, schedules, task
// logs) are asserted where they are used (aclReader, definitionReader,
// scheduleReader, logReader).
type stateReader interface {
	appliedView
	runReader
	eventReader
	claimReader
	queueReader
	statsReader
	snapshotReader
}

var (
	_ stateReader = (*fsm.FSM)(nil)
)

// proposeMode says how a command is proposed.
type proposeMode uint8

const (
	// alone: an entry of its own (Propose).
	alone proposeMode = iota
	// grouped: through the group commit (ProposeGrouped), for the hot
	// path (submit, claim, heartbeat, complete, fail).
	grouped
)

// propose proposes cmd and returns its result as a *R. Each command's
// result type is fixed by fsm (Submit answers *fsm.SubmitResult, and so
// on); a result of another type, or none, is a bug between the two
// packages and comes back as ErrUnexpectedResult (an internal error to the
// client), never as a panic in the agent. Errors and the index are those of
// the proposal.
func propose[R any](ctx context.Context, p proposer, cmd fsm.Command, mode proposeMode) (*R, uint64, error) {
	var res any
	var idx uint64
	var err error
	if mode == grouped {
		res, idx, err = p.ProposeGrouped(ctx, cmd)
	} else {
		res, idx, err = p.Propose(ctx, cmd)
	}
	if err != nil {
		return nil, idx, err
	}
	r, ok := res.(*R)
	if !ok || r == nil {
		return nil, idx, fmt.Errorf("%w: %s at index %d answered %T, want %T", ErrUnexpectedResult, cmd.Type(), idx, res, r)
	}
	return r, idx, nil
}
