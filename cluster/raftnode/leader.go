package raftnode

import (
	"context"
	"maps"
	"time"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/fsm"
)

// Leadership. Transitions come from a raft observer (RaftState and
// LeaderObservation); on every notification the monitor re-reads raft's
// state, so a dropped notification can only delay, never lose, a change.
//
// A new leader first issues a Barrier, so it acts on every entry the
// previous leader committed, then starts its loops. The loops only propose
// commands; they never touch state directly. They stop when leadership is
// lost.

func (n *Node) monitorLeadership() {
	defer n.wg.Done()
	check := func() {
		if n.raft.State() == raft.Leader {
			n.establishLeadership()
		} else {
			n.revokeLeadership()
		}
	}
	check()
	for {
		select {
		case <-n.obsCh:
			check()
			n.signalLeaderChange()
		case <-n.stop:
			return
		}
	}
}

func (n *Node) establishLeadership() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.leaderCancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	n.leaderCancel, n.leaderDone = cancel, done
	ready := make(chan struct{})
	n.ready = ready
	n.leaderChanges.Add(1)
	n.log.Info("gained leadership")
	go func() {
		defer close(done)
		for {
			err := n.raft.Barrier(5 * time.Second).Error()
			if err == nil {
				break
			}
			n.log.Warn("leader barrier failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			if n.raft.State() != raft.Leader {
				return
			}
		}
		n.publishMeta(ctx)
		if !n.cfg.DisableLoops {
			n.renewUnacked(ctx)
		}
		n.isLeader.Store(true)
		close(ready)
		defer n.isLeader.Store(false)
		loops := []func(context.Context){n.disp.run, n.autopilotLoop}
		if !n.cfg.DisableLoops {
			loops = append(loops, n.deadlineLoop, n.gcLoop, n.digestLoop, n.scheduleLoop, n.autoLoop)
		}
		finished := make(chan struct{}, len(loops))
		for _, loop := range loops {
			go func() { loop(ctx); finished <- struct{}{} }()
		}
		for range loops {
			<-finished
		}
	}()
}

func (n *Node) revokeLeadership() {
	n.mu.Lock()
	cancel, done := n.leaderCancel, n.leaderDone
	n.leaderCancel, n.leaderDone, n.ready = nil, nil, nil
	n.mu.Unlock()
	if cancel != nil {
		n.log.Info("lost leadership")
		cancel()
		<-done
		n.disp.failAll(n.notLeader())
	}
}

// LoopsRunning reports whether this node is the leader with its loops
// started (after the barrier).
func (n *Node) LoopsRunning() bool { return n.isLeader.Load() }

// WaitLeaderReady blocks until this node leads with every entry of earlier
// terms applied (its barrier), so its local state reflects every write
// acknowledged by any leader. It returns *NotLeaderError if the node does
// not lead, or stops leading while waiting.
func (n *Node) WaitLeaderReady(ctx context.Context) error {
	for {
		if n.raft.State() != raft.Leader {
			return n.notLeader()
		}
		n.mu.Lock()
		ready := n.ready
		n.mu.Unlock()
		if ready == nil {
			// Elected, but the monitor has not started this term yet.
			n.WaitLeaderChange(ctx, 20*time.Millisecond)
		} else {
			select {
			case <-ready: // the usual case, checked first: no timer per call
				if n.raft.State() == raft.Leader {
					return nil
				}
				continue
			default:
			}
			// Wait; the loop then re-checks leadership, the signal and ctx.
			t := time.NewTimer(50 * time.Millisecond) // leadership may move meanwhile
			select {
			case <-ready:
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		if ctx.Err() != nil {
			return n.notLeader()
		}
	}
}

// deadlineLoop proposes Reap when a lease is due and Tick when a retry, a
// compensation retry or a breaker cool-down is due. It sleeps until the
// earliest deadline and re-reads them whenever state changes.
func (n *Node) deadlineLoop(ctx context.Context) {
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	defer idle.Stop()
	for {
		changed := n.fsm.Changed()
		d, err := n.fsm.NextDeadlines()
		if err != nil {
			n.log.Error("read deadlines", "err", err)
		}
		now := max(n.cfg.Clock().UnixMilli(), d.Now)
		proposed := false
		if d.Lease != 0 && d.Lease <= now {
			proposed = n.proposeLoopCmd(ctx, &fsm.Reap{})
		}
		if (d.Wake != 0 && d.Wake <= now) || (d.Breaker != 0 && d.Breaker <= now) {
			proposed = n.proposeLoopCmd(ctx, &fsm.Tick{}) || proposed
		}
		if proposed {
			continue
		}
		// Sleep until the earliest deadline; with none, until state
		// changes (an idle leader keeps no timer for this loop). A failed
		// read, or a due deadline whose proposal failed or did nothing, is
		// retried after a second.
		wait := time.Duration(0)
		if err != nil {
			wait = time.Second
		}
		for _, at := range []int64{d.Lease, d.Wake, d.Breaker} {
			if at == 0 {
				continue
			}
			w := time.Second
			if at > now {
				w = min(w, time.Duration(at-now)*time.Millisecond)
			}
			if wait == 0 || w < wait {
				wait = w
			}
		}
		var due <-chan time.Time
		if wait > 0 {
			idle.Reset(wait)
			due = idle.C
		}
		select {
		case <-ctx.Done():
			return
		case <-due:
		case <-changed:
			// New leases or retries may have earlier deadlines; re-read
			// after a short pause so a busy cluster re-reads at most ~100/s.
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// proposeLoopCmd proposes a leader-loop command; it reports whether the
// command did something (so the loop should look again at once).
func (n *Node) proposeLoopCmd(ctx context.Context, cmd fsm.Command) bool {
	res, _, err := n.Propose(ctx, cmd)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("leader loop proposal failed", "cmd", cmd.Type().String(), "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		return false
	}
	if c, ok := res.(*fsm.CountResult); ok {
		return c.Count > 0 || c.More
	}
	return false
}

// gcInterval is how often the leader looks for runs past retention (a
// cheap read of the oldest finished run).
const gcInterval = 5 * time.Second

// gcLoop removes finished runs past retention.
func (n *Node) gcLoop(ctx context.Context) {
	t := time.NewTicker(gcInterval)
	defer t.Stop()
	for {
		for n.fsm.GCDue(n.cfg.Clock().UnixMilli()) && ctx.Err() == nil {
			if !n.proposeLoopCmd(ctx, &fsm.GC{}) {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renewUnacked gives every lease no worker has acknowledged yet a fresh
// lease period from this term's start (fsm/apply_term.go: its answer may
// have been lost with the previous leader, and the worker's re-sent claim
// needs an election and its client's patience to get here). It runs after
// the barrier and before the reaper starts.
func (n *Node) renewUnacked(ctx context.Context) {
	for ctx.Err() == nil {
		res, _, err := n.Propose(ctx, &fsm.NewTerm{Leader: n.cfg.NodeID})
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("renew unacknowledged leases", "err", err)
			}
			return
		}
		if c, ok := res.(*fsm.CountResult); !ok || !c.More {
			if ok && c.Count > 0 {
				n.log.Info("renewed unacknowledged leases for the new term", "leases", c.Count)
			}
			return
		}
	}
}

// publishMeta records this node's addresses in the replicated state, so
// followers can find the leader's forwarding address.
func (n *Node) publishMeta(ctx context.Context) {
	if len(n.cfg.Meta) == 0 {
		return
	}
	if rec, err := n.fsm.Node(n.cfg.NodeID); err == nil && maps.Equal(rec.Meta, n.cfg.Meta) {
		return
	}
	if _, _, err := n.Propose(ctx, &fsm.NodeInfo{ID: n.cfg.NodeID, Meta: n.cfg.Meta}); err != nil && ctx.Err() == nil {
		n.log.Warn("publish node addresses", "err", err)
	}
}

// NodeMeta returns the published meta of a node (e.g. the leader).
func (n *Node) NodeMeta(id string) map[string]string {
	rec, err := n.fsm.Node(id)
	if err != nil {
		return nil
	}
	return rec.Meta
}
