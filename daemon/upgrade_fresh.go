package daemon

import (
	"context"
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

// freshPoller is the upgrade loop's fresh-cluster check.
type freshPoller struct {
	due  bool // the check runs at this wake-up
	slow bool // the voters allow nothing newer: poll slowly
}

// next says how long to wait before the next check, and whether there is
// one: only while the state is fresh and this binary applies more than the
// active version.
func (p *freshPoller) next(a *Agent) (time.Duration, bool) {
	f, ok := a.state.(interface{ Fresh() bool })
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
