package cluster

import (
	"context"
	"time"
)

// Autopilot's vocabulary: its configuration, its view of the servers, and
// the member probe the daemon answers (raftnode/autopilot.go runs it).

// MemberStats is what a member reports of its raft log.
type MemberStats struct {
	LastTerm, LastIndex uint64
	LastContact         time.Duration // since it last heard from a leader
}

// MemberProber asks members for their stats (in parallel, bounded by
// ctx); a member missing from the answer did not answer.
type MemberProber interface {
	ProbeMembers(ctx context.Context, servers []PeerStatus) map[string]MemberStats
}

// AutopilotConfig configures autopilot (Consul's names).
type AutopilotConfig struct {
	CleanupDeadServers bool
	// LastContactThreshold: a server that has not heard from the leader
	// for longer is unhealthy (0: 4 x the heartbeat timeout, at least 1s).
	LastContactThreshold time.Duration
	// MaxTrailingLogs: a server this many entries behind the leader is
	// unhealthy (0: 1000).
	MaxTrailingLogs uint64
	// MinQuorum: dead-server cleanup never leaves fewer voters (0: the
	// number of servers in the initial configuration).
	MinQuorum uint
	// ServerStabilizationTime: how long a server must be healthy to count
	// as stable (0: 10s).
	ServerStabilizationTime time.Duration
	// DeadServerAfter: a server that has not answered the member probe for
	// this long is failed (0: 30s).
	DeadServerAfter time.Duration
}

// AutopilotServer is one server's health as autopilot sees it.
type AutopilotServer struct {
	ID          string        `json:"id"`
	Address     string        `json:"address"`
	Status      string        `json:"status"` // alive | failed | unknown
	Voter       bool          `json:"voter"`
	Leader      bool          `json:"leader"`
	Healthy     bool          `json:"healthy"`
	StableSince time.Time     `json:"stable_since"`
	LastContact time.Duration `json:"last_contact"`
	LastTerm    uint64        `json:"last_term"`
	LastIndex   uint64        `json:"last_index"`
}

// AutopilotState is autopilot's latest view (on the leader).
type AutopilotState struct {
	Healthy          bool              `json:"healthy"`
	FailureTolerance int               `json:"failure_tolerance"`
	Leader           string            `json:"leader"`
	Servers          []AutopilotServer `json:"servers"`
}
