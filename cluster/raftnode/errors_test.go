package raftnode

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
)

// The node's errors are package cluster's values, so a caller that imports
// only cluster (the daemon) matches them: a follower's proposal and
// membership change are *cluster.NotLeaderError naming the leader, which
// is cluster.ErrNotLeader and domain.ErrUnavailable.
func TestFollowerErrorsMatchTheClusterVocabulary(t *testing.T) {
	c := NewTestCluster(t, 3, nil)
	leader := c.Leader()
	f := c.Followers()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, proposeErr := f.Propose(ctx, &fsm.Heartbeat{TaskID: "r/a", Token: 1})
	for what, err := range map[string]error{"propose": proposeErr, "add voter": f.AddVoter("n9", "127.0.0.1:1"), "barrier": f.Barrier(ctx)} {
		var nl *cluster.NotLeaderError
		if !errors.As(err, &nl) || !errors.Is(err, cluster.ErrNotLeader) || !errors.Is(err, domain.ErrUnavailable) {
			t.Fatalf("%s on a follower: %v (%T), want a *cluster.NotLeaderError", what, err, err)
		}
		if nl.LeaderID != "" && nl.LeaderID != leader.ID() {
			t.Fatalf("%s on a follower names leader %q, want %q", what, nl.LeaderID, leader.ID())
		}
	}
}
