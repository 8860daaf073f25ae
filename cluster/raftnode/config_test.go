package raftnode

import (
	"testing"
	"time"

	"github.com/flowd/flowd/cluster"
)

// The node hands raft the resolved timing: a multiplier alone scales all
// three timeouts.
func TestConfigDefaultsApplyTheMultiplier(t *testing.T) {
	c := Config{Config: cluster.Config{RaftMultiplier: 2}}
	c.defaults()
	if c.HeartbeatTimeout != time.Second || c.ElectionTimeout != time.Second || c.LeaderLeaseTimeout != time.Second {
		t.Fatalf("multiplier 2: heartbeat %s election %s lease %s, want 1s each", c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout)
	}
	c = Config{Config: cluster.Config{RaftMultiplier: 2, HeartbeatTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond}}
	c.defaults()
	if c.HeartbeatTimeout != 200*time.Millisecond || c.ElectionTimeout != time.Second || c.LeaderLeaseTimeout != 100*time.Millisecond {
		t.Fatalf("explicit timeouts: heartbeat %s election %s lease %s", c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout)
	}
}
