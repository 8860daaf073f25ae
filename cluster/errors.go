package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// Errors of the cluster layer.
var (
	// ErrNotLeader: this node cannot propose; forward to the leader. A
	// *NotLeaderError also matches domain.ErrUnavailable.
	ErrNotLeader = errors.New("not the leader")
	// ErrLeadershipLost: the node lost leadership while a proposal was in
	// flight; its outcome is unknown (it may still commit).
	ErrLeadershipLost = errors.New("leadership lost while the command was in flight; its outcome is unknown")
	// ErrShutdown: the node is shutting down.
	ErrShutdown = errors.New("node is shutting down")
)

// NotLeaderError says who the leader is, when known.
type NotLeaderError struct {
	LeaderID   string
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return "no leader yet: an election is in progress or too few nodes are up; retry shortly or run `flowd operator raft list-peers`"
	}
	return fmt.Sprintf("not the leader (the leader is %s at %s)", e.LeaderID, e.LeaderAddr)
}

// Is matches ErrNotLeader and domain.ErrUnavailable.
func (e *NotLeaderError) Is(target error) bool {
	return target == ErrNotLeader || target == domain.ErrUnavailable
}

// RetryAfter suggests when to retry.
func (e *NotLeaderError) RetryAfter() time.Duration { return 250 * time.Millisecond }

// ErrStorageFailed matches every error a node reports by its Failure
// method (raftnode/storage.go).
var ErrStorageFailed = errors.New("local storage failed")

// StorageFailure is why a node stopped trusting its storage.
type StorageFailure struct {
	Err error
}

func (e *StorageFailure) Error() string {
	return fmt.Sprintf("local storage failed; this node stopped so that it cannot diverge or serve wrong data: %v (fix the disk, then restart the agent: it recovers from its raft log and snapshots; if its state is damaged, move <data-dir>/state away first so it is rebuilt from the newest snapshot and the log)", e.Err)
}

func (e *StorageFailure) Unwrap() error { return e.Err }

// Is matches ErrStorageFailed.
func (e *StorageFailure) Is(target error) bool { return target == ErrStorageFailed }

// Errors of the TLS stream layer.
var (
	// ErrNotMember: the peer's certificate is valid but names a node that
	// is not in the current raft configuration.
	ErrNotMember = errors.New("not a member of the raft configuration")
)
