package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/flowd/flowd/fsm"
)

// A fresh cluster starts at the newest state-machine version its voters
// apply. Finalizing an upgrade is a decision about state that exists (after
// it, the previous release can no longer read it); a cluster that has never
// been given work (fsm.FSM.Fresh: no run, definition or schedule, no task
// ever finished) has none, and waiting --upgrade-auto-finalize (10 minutes)
// or for an operator before it may use what its release brings would only
// refuse its first workflows. So while the state is fresh and this binary
// applies a newer version than the active one, the leader finalizes at
// once: to the highest version every voter applies (a voter of an older
// release holds it back, as in any upgrade). It polls quickly at first (a
// new cluster's first submit follows its start closely) and slowly once
// it has raised what the voters allow.

const (
	freshPollFast = 50 * time.Millisecond
	freshPollSlow = 5 * time.Second
)

// freshReader is what the fresh-cluster checks read (fsm.FSM.Fresh): whether
// the state has never been given work.
type freshReader interface{ Fresh() bool }

// freshPoller is the upgrade loop's fresh-cluster check.
type freshPoller struct {
	due  bool // the check runs at this wake-up
	slow bool // the voters allow nothing newer: poll slowly
}

// next says how long to wait before the next check, and whether there is
// one: only while the state is fresh and this binary applies more than the
// active version.
func (p *freshPoller) next(a *Agent) (time.Duration, bool) {
	f, ok := a.state.(freshReader)
	p.due = ok && a.state.ActiveVersion() < fsm.MaxVersion && f.Fresh()
	switch {
	case !p.due:
		return 0, false
	case p.slow:
		return freshPollSlow, true
	}
	return freshPollFast, true
}

// finalizeFresh raises a fresh cluster's version (on the leader) and
// reports whether it raised it.
func (a *Agent) finalizeFresh(ctx context.Context, p *freshPoller) bool {
	cctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	res, err := a.finalize(cctx, "fresh cluster")
	if err != nil {
		a.log.Debug("fresh cluster: finalize not possible yet", "err", err)
		return false
	}
	p.slow = !res.Changed
	return res.Changed
}

// freshGate closes the race between a fresh cluster's first write and the
// upgrade loop's raise: the writes that end freshness (a submit, a
// definition, a schedule) first raise the version themselves, on the
// leader, while the state is still fresh, so a workflow submitted right
// after `flowd dev` starts may already use what its release brings. A
// member that has just started may not answer yet (its forwarding address
// is published by an entry of its own), so the gate tries for up to
// freshGateWait before it lets the write through at the version it has;
// one attempt at a time, and after a wait that raised nothing (an older or
// missing voter) none for freshPollSlow, so a busy fresh cluster does not
// wait on every write.
type freshGate struct {
	mu   sync.Mutex
	last time.Time
}

// freshGateWait bounds how long a fresh cluster's first write waits for
// its members to answer before it is proposed at the active version.
const freshGateWait = 3 * time.Second

// raiseIfFresh is called by the leader before proposing a write that ends
// freshness. It never fails the write: a raise that is not possible leaves
// the version as it is and the write proposed at it.
func (a *Agent) raiseIfFresh(ctx context.Context) {
	if a.state == nil || a.state.ActiveVersion() >= fsm.MaxVersion {
		return
	}
	f, ok := a.state.(freshReader)
	if !ok {
		return
	}
	g := &a.fresh
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.last) < freshPollSlow {
		return
	}
	deadline := time.Now().Add(freshGateWait)
	t := time.NewTimer(0)
	defer t.Stop()
	for a.state.ActiveVersion() < fsm.MaxVersion && f.Fresh() {
		var p freshPoller
		if a.finalizeFresh(ctx, &p) {
			return // raised
		}
		if p.slow { // every voter answered: none applies anything newer
			g.last = time.Now()
			return
		}
		if time.Now().After(deadline) {
			a.log.Info("fresh cluster: not every voter answered with its versions; this write goes in at the active version",
				"active", a.state.ActiveVersion(), "newest", fsm.MaxVersion)
			g.last = time.Now()
			return
		}
		t.Reset(freshPollFast)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
