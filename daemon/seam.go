package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
)

// The seam between the handlers and the cluster (see DESIGN.md, "The
// seam"). Handlers reach raft and the state store only through the two
// interfaces below, defined here, where they are used, and kept to what the
// handlers call (rqlite's proxy.Store, hraftd's httpd.Store). In production
// both are the agent's *cluster.Node and its *fsm.FSM; in tests, a test
// cluster's node or a fake. Lifecycle code (New, Shutdown, metrics) and the
// operator methods that need raft itself (membership, user restore) keep
// the concrete *cluster.Node.

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

// stateReader is the replicated state as the handlers read it: this node's
// applied view (see fsm.FSM for each method's contract). Every method is
// safe for concurrent use with Apply.
type stateReader interface {
	// AppliedIndex is the last index applied to this node's state.
	AppliedIndex() uint64
	// Changed returns a channel closed at the next commit (take it before
	// reading, then wait on it).
	Changed() <-chan struct{}
	// Now is the FSM clock: the largest leader stamp applied (ms).
	Now() int64
	Limits() domain.Limits
	ResolveRunID(short string) (string, error)
	GetRun(id string) (*fsm.Run, []*fsm.Task, error)
	GetRunOnly(id string) (*fsm.Run, error)
	GetSpec(id string) (*domain.Spec, error)
	GetTask(id string) (*fsm.Task, error)
	ListRunsWhere(state domain.RunState, q fsm.RunFilter, limit int, cursor string) ([]*fsm.Run, string, error)
	CountRuns() (map[domain.RunState]int, error)
	HasReady(w fsm.Waiter, now int64) bool
	ClaimedBy(worker, req string) ([]fsm.Claimed, error)
	LeaseOwners() map[string]int
	Queues() ([]fsm.QueueInfo, error)
	Breakers() ([]fsm.Breaker, error)
	Settings() (fsm.Settings, error)
	Counters() (fsm.Counters, error)
	Events(from uint64, runID string, limit int) ([]fsm.Event, uint64, error)
	LatestEvents(runID string, limit int) ([]fsm.Event, error)
	Digest() (string, uint64, error)
	Snapshot() (*fsm.Snapshot, error)
	// ActiveVersion is the cluster's state-machine version as applied here.
	ActiveVersion() fsm.Version
}

var (
	_ proposer    = (*cluster.Node)(nil)
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
