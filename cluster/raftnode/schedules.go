package raftnode

import (
	"context"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/cronexpr"
)

// scheduleLoop is the schedules' deadline loop: it proposes a ScheduleFire
// when a schedule's next fire time is due (computing, from the schedule's
// cron expression or interval, the fires missed beyond its catch-up window
// and the fire time after), and a release when a buffered fire's runs are
// done. It sleeps until the earliest fire time and re-reads the schedules
// after commits (at most ~50 times a second).
//
// The fire times are computed here, on the leader, and carried by the
// command: the state machine never parses a schedule, so replicas cannot
// disagree (a time zone database that differs between machines changes
// only what a leader proposes, never how an entry applies). A fire names
// the fire time it answers; a new leader that proposes a fire its
// predecessor already committed gets a lost race, so a failover neither
// fires twice nor skips.
func (n *Node) scheduleLoop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		changed := n.fsm.Changed()
		schedChanged := n.fsm.SchedulesChanged()
		scheds, err := n.fsm.Schedules()
		if err != nil {
			n.log.Error("read schedules", "err", err)
		}
		now := max(n.cfg.Clock().UnixMilli(), n.fsm.Now())
		progressed, retry := false, false
		var next int64
		for i := range scheds {
			s := &scheds[i]
			if s.State != domain.ScheduleActive {
				continue
			}
			if s.BufferedAt != 0 && n.fsm.ScheduleRunsDone(s.Active) {
				ok := n.proposeFire(ctx, &fsm.ScheduleFire{ID: s.ID, Release: true, FireAt: s.BufferedAt})
				progressed, retry = progressed || ok, retry || !ok
			}
			if s.NextFireAt == 0 {
				continue
			}
			if s.NextFireAt > now {
				if next == 0 || s.NextFireAt < next {
					next = s.NextFireAt
				}
				continue
			}
			cmd, err := fireCommand(s, now)
			if err != nil {
				n.log.Error("schedule timing", "schedule", s.ID, "err", err)
				retry = true
				continue
			}
			ok := n.proposeFire(ctx, cmd)
			progressed, retry = progressed || ok, retry || !ok
		}
		if ctx.Err() != nil {
			return
		}
		if progressed {
			continue
		}
		var wait time.Duration
		if next != 0 {
			wait = min(time.Duration(next-now)*time.Millisecond, time.Second)
		}
		if retry || err != nil {
			wait = time.Second
		}
		var due <-chan time.Time
		if wait > 0 {
			timer.Reset(wait)
			due = timer.C
		}
		// Every commit matters only to a schedule holding a buffered fire
		// until its runs end; otherwise only commits that change a
		// schedule do (re-reading every schedule after every commit was
		// work on the hot path, with no schedule at all).
		var anyCommit <-chan struct{}
		for i := range scheds {
			if scheds[i].State == domain.ScheduleActive && scheds[i].BufferedAt != 0 {
				anyCommit = changed
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-due:
		case <-schedChanged:
		case <-anyCommit:
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		if due != nil && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// fireCommand is the fire of schedule s, due at now.
func fireCommand(s *fsm.Schedule, now int64) (*fsm.ScheduleFire, error) {
	e, err := cronexpr.Parse(s.Cron, s.TZ, s.IntervalMS)
	if err != nil {
		return nil, err
	}
	fireAt, next, missed, from, to := e.CatchUp(s.NextFireAt, now, s.CatchupWindowMS)
	return &fsm.ScheduleFire{ID: s.ID, Due: s.NextFireAt, FireAt: fireAt, Next: next,
		Missed: missed, MissedFrom: from, MissedTo: to}, nil
}

// proposeFire proposes a fire; it reports whether it applied (false: a
// lost race, an error result or no leadership).
func (n *Node) proposeFire(ctx context.Context, cmd *fsm.ScheduleFire) bool {
	res, _, err := n.Propose(ctx, cmd)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("schedule fire proposal failed", "schedule", cmd.ID, "err", err)
		}
		return false
	}
	if e, isErr := res.(error); isErr {
		n.log.Error("schedule fire rejected", "schedule", cmd.ID, "err", e)
		return false
	}
	r, ok := res.(*fsm.FireResult)
	return ok && r.Changed
}
