package e2e

import (
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
)

// A sleep of 2 s (examples/workflows/sleep.yaml) completes no earlier than
// 2 s after it started, across a kill -9 of the leader while it sleeps,
// and its dependent runs.
func TestSleepAcrossLeaderKill(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNewest()
	cl := c.client()
	startWorker(t, c, "ws")
	id := submit(t, cl, workflow(t, "sleep.yaml"))
	testutil.EventuallyTrue(t, 20*time.Second, 20*time.Millisecond, "cool-down sleeping (ready)", func() bool {
		return task(t, cl, id+"/cool-down").State == domain.TaskReady
	})
	slept := time.Now()
	leader := c.waitLeader()
	c.kill9(leader)
	c.waitLeader(leader)
	r := waitRun(t, c.client(c.followers(leader)...), id, 30*time.Second)
	if r.State != domain.RunSucceeded {
		t.Fatalf("run %s", r.State)
	}
	nap := task(t, c.client(c.followers(leader)...), id+"/cool-down")
	if got := nap.FinishedAt.Sub(nap.ReadyAt); got < 2*time.Second {
		t.Fatalf("the sleep took %v by leader time, want at least 2s", got)
	}
	if since := time.Since(slept); since < 2*time.Second-100*time.Millisecond {
		t.Fatalf("the run ended %v after the sleep began", since)
	}
	c.restart(leader)
}
