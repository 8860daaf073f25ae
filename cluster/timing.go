package cluster

import (
	"fmt"
	"time"
)

// Raft's failure-detection timing at multiplier 1. A multiplier scales all
// of them (as Consul's raft_multiplier does); see DESIGN.md, "Timing on a
// busy machine", for why the leader lease equals the heartbeat timeout.
const (
	BaseHeartbeatTimeout = 500 * time.Millisecond
	BaseElectionTimeout  = 500 * time.Millisecond
	// DefaultRaftMultiplier is the multiplier when none is given.
	DefaultRaftMultiplier = 1.5
	// MaxRaftMultiplier bounds the multiplier: at 10 a crashed leader is
	// replaced after 5-15 s.
	MaxRaftMultiplier = 10.0
	// MinRaftMultiplier bounds it below: 0.1 gives 50 ms timeouts, already
	// shorter than a loaded machine's scheduling hiccups.
	MinRaftMultiplier = 0.1
)

// RaftTiming is raft's failure-detection timing. Zero fields take their
// defaults in Resolve.
type RaftTiming struct {
	// Multiplier scales the base timeouts (0: DefaultRaftMultiplier).
	Multiplier float64
	// Heartbeat: how long a follower goes without hearing from the leader
	// before it starts an election (raft randomises it up to 2x). Zero:
	// BaseHeartbeatTimeout x Multiplier.
	Heartbeat time.Duration
	// Election: how long a candidate waits for votes before it tries
	// again (randomised up to 2x). Zero: BaseElectionTimeout x Multiplier,
	// and at least Heartbeat (raft requires it).
	Election time.Duration
	// LeaderLease: how long the leader goes without hearing from a quorum
	// before it steps down (raft's check-quorum). Zero: Heartbeat, the
	// longest raft allows.
	LeaderLease time.Duration
}

// Resolve fills the zero fields: the base values times the multiplier,
// where no explicit value overrides them.
func (t RaftTiming) Resolve() RaftTiming {
	if t.Multiplier == 0 {
		t.Multiplier = DefaultRaftMultiplier
	}
	scale := func(d time.Duration) time.Duration {
		return time.Duration(float64(d) * t.Multiplier).Round(time.Millisecond)
	}
	if t.Heartbeat == 0 {
		t.Heartbeat = scale(BaseHeartbeatTimeout)
	}
	if t.Election == 0 {
		t.Election = max(scale(BaseElectionTimeout), t.Heartbeat)
	}
	if t.LeaderLease == 0 {
		t.LeaderLease = t.Heartbeat
	}
	return t
}

// Check reports what raft would refuse in resolved timing, naming the
// settings by names (multiplier, heartbeat, election, lease) the caller
// uses (flags, config fields).
func (t RaftTiming) Check(multiplier, heartbeat, election, lease string) []string {
	var problems []string
	if t.Multiplier < MinRaftMultiplier || t.Multiplier > MaxRaftMultiplier {
		problems = append(problems, fmt.Sprintf("%s %g must be between %g and %g (default %g)", multiplier, t.Multiplier, MinRaftMultiplier, MaxRaftMultiplier, DefaultRaftMultiplier))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{heartbeat, t.Heartbeat}, {election, t.Election}, {lease, t.LeaderLease}} {
		if d.v < 5*time.Millisecond {
			problems = append(problems, fmt.Sprintf("%s %s is too short (at least 5ms)", d.name, d.v))
		}
	}
	if t.Election < t.Heartbeat {
		problems = append(problems, fmt.Sprintf("%s %s must not be shorter than %s %s", election, t.Election, heartbeat, t.Heartbeat))
	}
	if t.LeaderLease > t.Heartbeat {
		problems = append(problems, fmt.Sprintf("%s %s must not be longer than %s %s (a leader must step down before the followers elect another)", lease, t.LeaderLease, heartbeat, t.Heartbeat))
	}
	return problems
}

// String is the timing as the agent logs it at start.
func (t RaftTiming) String() string {
	return fmt.Sprintf("multiplier %g: heartbeat %s, election %s, leader lease %s", t.Multiplier, t.Heartbeat, t.Election, t.LeaderLease)
}
