//go:build linux

package raftnode

import (
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm"
)

// onThread is what a function run by applyThread saw of its thread.
type onThread struct{ tid, nice int }

func observe(t *testing.T) onThread {
	t.Helper()
	n, err := threadNice()
	if err != nil {
		t.Error(err) // may run off the test's goroutine: no Fatal
	}
	return onThread{threadID(), n}
}

func (a *applyThread) observed(t *testing.T, follower bool) onThread {
	t.Helper()
	a.set(follower)
	return observe(t)
}

// Raft's goroutine itself is lowered while following and restored on
// leading.
func TestApplyThreadLowersInPlace(t *testing.T) {
	if !canRestoreThreadPriority() {
		t.Skip("this process may not lower a thread's nice value again (no CAP_SYS_NICE or RLIMIT_NICE)")
	}
	a := &applyThread{nice: 5, log: slog.Default()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // ends locked to its thread: the thread goes with it
		me := observe(t)
		for i, step := range []struct {
			follower bool
			nice     int
		}{{false, me.nice}, {true, min(me.nice+5, 19)}, {true, min(me.nice+5, 19)}, {false, me.nice}, {true, min(me.nice+5, 19)}} {
			got := a.observed(t, step.follower)
			if got.tid != me.tid || got.nice != step.nice {
				t.Errorf("step %d (follower %v): thread %d at nice %d, want the caller's %d at %d", i, step.follower, got.tid, got.nice, me.tid, step.nice)
			}
		}
		if got := observe(t); got.nice != me.nice+5 && me.nice+5 <= 19 {
			t.Errorf("after a follower apply the caller's thread is at nice %d, want %d", got.nice, me.nice+5)
		}
	}()
	<-done
}

// On a cluster, the followers apply on lowered threads and the leader at
// the agent's priority, also after leadership moved; where the agent may
// not set a nice value back, every node applies at the agent's.
func TestFollowersApplyAtLowerPriority(t *testing.T) {
	for _, may := range []bool{true, false} {
		t.Run(fmt.Sprintf("privileged=%v", may), func(t *testing.T) {
			if may && !canRestoreThreadPriority() {
				t.Skip("this process may not lower a thread's nice value again (no CAP_SYS_NICE or RLIMIT_NICE)")
			}
			probeInPlace = func() bool { return may }
			defer func() { probeInPlace = canRestoreThreadPriority }()
			followersApplyLowered(t, may)
		})
	}
}

func followersApplyLowered(t *testing.T, lowered bool) {
	c := NewTestCluster(t, 3, nil)
	base := observe(t).nice
	type key struct{ node, run string }
	var mu sync.Mutex
	seen := map[key]int{} // the nice value of the thread that applied a run's submit
	changed := make(chan struct{}, 1)
	for _, n := range c.Nodes {
		id := n.ID()
		n.FSM().SetCommitHook(func(evs []fsm.Event) {
			nice, err := threadNice()
			if err != nil {
				nice = -100
			}
			mu.Lock()
			for _, ev := range evs {
				if ev.Kind == "run" && ev.Transition == "created" {
					seen[key{id, ev.RunID}] = nice
				}
			}
			mu.Unlock()
			select {
			case changed <- struct{}{}:
			default:
			}
		})
	}
	check := func(run string) {
		t.Helper()
		c.Propose(&fsm.Submit{ID: run, Spec: mustSpec(t, diamond)})
		leader := c.Leader().ID()
		timeout := time.After(10 * time.Second)
		for {
			mu.Lock()
			got := map[string]int{}
			for _, n := range c.Nodes {
				if nice, ok := seen[key{n.ID(), run}]; ok {
					got[n.ID()] = nice
				}
			}
			mu.Unlock()
			if len(got) == len(c.Nodes) {
				for id, nice := range got {
					want := min(base+DefaultFollowerApplyNice, 19)
					if id == leader || !lowered {
						want = base
					}
					if nice != want {
						t.Errorf("%s: node %s (leader %s) applied at nice %d, want %d", run, id, leader, nice, want)
					}
				}
				return
			}
			select {
			case <-changed:
			case <-timeout:
				t.Fatalf("%s: only %v applied it within 10 s", run, got)
			}
		}
	}
	check("run-1")
	old := c.Leader()
	if err := old.TransferLeadership(""); err != nil {
		t.Fatal(err)
	}
	for c.Leader() == old {
		old.waitLeaderChange(t.Context())
	}
	for i := range 3 {
		check(fmt.Sprintf("run-%d", i+2))
	}
}

// Raft's FSM goroutine replays the log before NewRaft returns, so before
// n.raft is set: IsLeader must not need n.raft (reading
// it raced with startRaft and could dereference nil, which
// TestRestartAfterSnapshotAndCompaction caught under -race).
func TestIsLeaderBeforeRaftIsSet(t *testing.T) {
	if (&Node{}).IsLeader() {
		t.Fatal("a node without raft leads")
	}
}
