package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	raftnode "github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/internal/testing/testutil"
)

// A leader whose process is descheduled for less than its lease (SIGSTOP
// for 400 ms less than the lease of flowd dev's profile, multiplier 2:
// 600 ms of 1 s) keeps leading: the followers do not elect another, and it
// does not step down when it runs again (raft's check-quorum looks at how
// long ago it heard from the followers, which includes its own pause).
// With the old lease of half the heartbeat timeout (500 ms here) it
// stepped down after such a pause, and a busy machine saw elections with
// nothing failing.
func TestLeaderSurvivesAPauseShorterThanItsLease(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and pauses its leader")
	}
	timing := raftnode.RaftTiming{Multiplier: 2}.Resolve()
	pause := timing.LeaderLease - 400*time.Millisecond
	c := startClusterTimed(t, 3, "--raft-multiplier", fmt.Sprint(timing.Multiplier))
	for round := range 3 {
		leader, term := c.agreedLeader()
		logBefore := c.logSize(leader)
		if err := leader.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(pause) // the fault itself: the leader's process stopped for this long
		if err := leader.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		// Any election the pause causes starts within 2x the heartbeat
		// timeout of the leader's last heartbeat (raft randomises the
		// followers' timeouts up to 2x); the leader's own lease check runs
		// as soon as it runs again. So watch every agent for that long.
		end := time.Now().Add(2*timing.Heartbeat + 500*time.Millisecond)
		for time.Now().Before(end) {
			for _, a := range c.agents {
				if st := c.status(a); st != nil && (st.Term != term || (st.LeaderID != "" && st.LeaderID != leader.id)) {
					t.Fatalf("round %d: after a %s pause of leader %s (term %d, lease %s), %s reports term %d leader %q state %s",
						round, pause, leader.id, term, timing.LeaderLease, a.id, st.Term, st.LeaderID, st.State)
				}
			}
			time.Sleep(50 * time.Millisecond) // polling other processes for the window above
		}
		if log := c.logSince(leader, logBefore); strings.Contains(log, "stepping down") || strings.Contains(log, "entering follower state") {
			t.Fatalf("round %d: leader %s stepped down after a %s pause:\n%s", round, leader.id, pause, tail(log, 20))
		}
	}
}

// agreedLeader waits until every agent names the same leader, which
// reports itself leader, and returns it with its term.
func (c *cluster) agreedLeader() (*agent, uint64) {
	c.t.Helper()
	var leader *agent
	var term uint64
	// readiness polling of external processes
	testutil.EventuallyTrue(c.t, 20*time.Second, 50*time.Millisecond, "the agents to agree on a leader", func() bool {
		leader, term = nil, 0
		var named []string
		for _, a := range c.agents {
			st := c.status(a)
			if st == nil {
				break
			}
			named = append(named, st.LeaderID)
			if st.State == "leader" {
				leader, term = a, st.Term
			}
		}
		agree := leader != nil && len(named) == len(c.agents)
		for _, id := range named {
			agree = agree && id == leader.id
		}
		return agree
	})
	return leader, term
}

func (c *cluster) logSize(a *agent) int64 {
	fi, err := os.Stat(a.dir + ".log")
	if err != nil {
		c.t.Fatal(err)
	}
	return fi.Size()
}

func (c *cluster) logSince(a *agent, off int64) string {
	b, err := os.ReadFile(a.dir + ".log")
	if err != nil {
		c.t.Fatal(err)
	}
	return string(b[min(off, int64(len(b))):])
}
