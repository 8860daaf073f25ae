package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	cond "github.com/flowd/flowd/fsm/expr"
	"github.com/flowd/flowd/internal/cronexpr"
	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/rpc/schedrpc"
)

// Schedule methods. Timing is parsed here and on the leader's schedule
// loop (cluster/raftnode/schedules.go), never in the state machine: the leader
// computes the first fire time of a create or resume with its own clock
// and puts it in the command.

// scheduleReader is the FSM's schedule reads (an addition to stateReader
// kept here, so fakes of the seam need not implement it).
type scheduleReader interface {
	Schedules() ([]fsm.Schedule, error)
	GetSchedule(id string) (*fsm.Schedule, *fsm.ScheduleBody, error)
}

// liveActive drops the runs that have finished from s's active list: the
// stored list is pruned only at the schedule's next fire (a day later for a
// nightly one), so a read filters it by the runs' states.
func (a *Agent) liveActive(s *fsm.Schedule) {
	if ur, ok := a.state.(interface{ UnfinishedRuns(ids []string) []string }); ok && len(s.Active) > 0 {
		s.Active = ur.UnfinishedRuns(s.Active)
	}
}

func (a *Agent) schedules() (scheduleReader, error) {
	r, ok := a.state.(scheduleReader)
	if !ok {
		return nil, fmt.Errorf("this agent's state has no schedules")
	}
	return r, nil
}

// leaderNow is the time a leader computes fire times from: its clock, or
// the FSM's if that is ahead (a previous leader's clock was).
func (a *Agent) leaderNow() int64 { return max(time.Now().UnixMilli(), a.state.Now()) }

func checkScheduleID(id string) error {
	if id == "" {
		return invalid("id (the schedule) is required")
	}
	if err := domain.ValidateScheduleID(id, domain.DefaultLimits); err != nil {
		return invalid("%v", err)
	}
	return nil
}

func (a *Agent) scheduleCreate(ctx context.Context, p schedrpc.CreateParams) (schedrpc.CreateResult, error) {
	if err := checkScheduleID(p.ID); err != nil {
		return schedrpc.CreateResult{}, err
	}
	if len(p.Workflow) == 0 || string(p.Workflow) == "null" {
		return schedrpc.CreateResult{}, invalid("workflow is required: the spec each fire starts")
	}
	expr, err := cronexpr.Parse(p.Cron, p.TimeZone, p.IntervalMS)
	if err != nil {
		return schedrpc.CreateResult{}, invalid("%v", err)
	}
	if !domain.ValidOverlap(domain.Overlap(p.Overlap)) {
		return schedrpc.CreateResult{}, invalid("overlap %q must be skip, buffer_one, allow or cancel_other", p.Overlap)
	}
	if p.CatchupWindowMS != 0 && p.CatchupWindowMS < 1000 {
		return schedrpc.CreateResult{}, invalid("catchup_window_ms %d must be at least 1000 (or 0 for the default of %d)", p.CatchupWindowMS, domain.DefaultCatchupWindowMS)
	}
	if err := checkLabels(p.Labels); err != nil {
		return schedrpc.CreateResult{}, err
	}
	if _, ok := p.Labels[domain.ScheduleLabel]; ok {
		return schedrpc.CreateResult{}, invalid("label %s is set by the schedule itself", domain.ScheduleLabel)
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodScheduleCreate, p, func(ctx context.Context) (schedrpc.CreateResult, error) {
		a.raiseIfFresh(ctx)
		spec, err := domain.ParseSpec(p.Workflow, a.state.Limits())
		err = cond.Validate(spec, err) // the when conditions compile
		if err == nil {
			err = fsm.SpecNeedsVersion(spec, a.state.ActiveVersion()) // refused before it is proposed
		}
		if err != nil {
			return schedrpc.CreateResult{}, err
		}
		first := expr.First(a.leaderNow())
		if first == 0 {
			return schedrpc.CreateResult{}, invalid("cron expression %q never fires", p.Cron)
		}
		res, idx, err := propose[fsm.ScheduleResult](ctx, a.prop, &fsm.ScheduleCreate{
			ID: p.ID, Cron: p.Cron, TZ: p.TimeZone, IntervalMS: p.IntervalMS, Spec: spec, Input: p.Input,
			Labels: p.Labels, Overlap: domain.Overlap(p.Overlap), CatchupWindowMS: p.CatchupWindowMS,
			Paused: p.Paused, Note: p.Note, NextFireAt: first}, alone)
		if err != nil {
			return schedrpc.CreateResult{}, err
		}
		out := schedrpc.CreateResult{ID: res.ID, State: string(res.State), Created: res.Created, Index: idx}
		if res.Created {
			out.NextFireAt = ms(first)
		}
		return out, nil
	})
}

func toSchedule(s *fsm.Schedule) schedrpc.Schedule {
	return schedrpc.Schedule{ID: s.ID, State: string(s.State), Cron: s.Cron, TimeZone: s.TZ, IntervalMS: s.IntervalMS,
		Workflow: s.Workflow, Labels: s.Labels, Overlap: string(s.Overlap), CatchupWindowMS: s.CatchupWindowMS,
		Note: s.Note, NextFireAt: ms(s.NextFireAt), LastFireAt: ms(s.LastFireAt), LastRunID: s.LastRunID,
		ActiveRuns: s.Active, BufferedAt: ms(s.BufferedAt), Fires: s.Fires, Started: s.Started,
		Skipped: s.Skipped, Missed: s.Missed, CreatedAt: ms(s.CreatedAt)}
}

func (a *Agent) scheduleList(context.Context, struct{}) (schedrpc.ListResult, error) {
	sr, err := a.schedules()
	if err != nil {
		return schedrpc.ListResult{}, err
	}
	ss, err := sr.Schedules()
	if err != nil {
		return schedrpc.ListResult{}, err
	}
	out := schedrpc.ListResult{Schedules: make([]schedrpc.Schedule, 0, len(ss))}
	for i := range ss {
		if ss[i].State == domain.SchedulePaused {
			ss[i].NextFireAt = 0
		}
		a.liveActive(&ss[i])
		out.Schedules = append(out.Schedules, toSchedule(&ss[i]))
	}
	return out, nil
}

func (a *Agent) scheduleGet(_ context.Context, p schedrpc.IDParams) (schedrpc.Schedule, error) {
	if err := checkScheduleID(p.ID); err != nil {
		return schedrpc.Schedule{}, err
	}
	sr, err := a.schedules()
	if err != nil {
		return schedrpc.Schedule{}, err
	}
	s, body, err := sr.GetSchedule(p.ID)
	if err != nil {
		return schedrpc.Schedule{}, err
	}
	n := p.Next
	if n <= 0 {
		n = 5
	}
	n = min(n, 100)
	paused := s.State == domain.SchedulePaused
	if paused {
		s.NextFireAt = 0
	}
	a.liveActive(s)
	out := toSchedule(s)
	if expr, err := cronexpr.Parse(s.Cron, s.TZ, s.IntervalMS); err == nil && !paused {
		for _, t := range expr.Upcoming(s.NextFireAt, n) {
			out.NextFires = append(out.NextFires, ms(t))
		}
	}
	if body != nil {
		out.Spec, _ = json.Marshal(body.Spec)
		out.Input = body.Input
	}
	return out, nil
}

func (a *Agent) schedulePause(pause bool) func(context.Context, schedrpc.PauseParams) (rpc.ChangedResult, error) {
	method := rpc.MethodScheduleResume
	if pause {
		method = rpc.MethodSchedulePause
	}
	return func(ctx context.Context, p schedrpc.PauseParams) (rpc.ChangedResult, error) {
		if err := checkScheduleID(p.ID); err != nil {
			return rpc.ChangedResult{}, err
		}
		ctx, cancel := withTimeout(ctx, writeTimeout)
		defer cancel()
		return onLeader(ctx, a.proxy, method, p, func(ctx context.Context) (rpc.ChangedResult, error) {
			cmd := &fsm.SchedulePause{ID: p.ID, Paused: pause, Note: p.Note}
			if !pause {
				sr, err := a.schedules()
				if err != nil {
					return rpc.ChangedResult{}, err
				}
				s, _, err := sr.GetSchedule(p.ID)
				if err != nil {
					return rpc.ChangedResult{}, err
				}
				expr, err := cronexpr.Parse(s.Cron, s.TZ, s.IntervalMS)
				if err != nil {
					return rpc.ChangedResult{}, err
				}
				// Fires missed while paused are not caught up.
				if cmd.Next = expr.First(a.leaderNow()); cmd.Next == 0 {
					return rpc.ChangedResult{}, invalid("schedule %s never fires again; delete it", p.ID)
				}
			}
			res, idx, err := propose[fsm.ChangedResult](ctx, a.prop, cmd, alone)
			if err != nil {
				return rpc.ChangedResult{}, err
			}
			return rpc.ChangedResult{Changed: res.Changed, Index: idx}, nil
		})
	}
}

func (a *Agent) scheduleTrigger(ctx context.Context, p schedrpc.TriggerParams) (schedrpc.FireResult, error) {
	if err := checkScheduleID(p.ID); err != nil {
		return schedrpc.FireResult{}, err
	}
	var err error
	if p.RunID == "" {
		p.RunID = newRunID() // before forwarding, so a retried forward starts one run
	} else if p.RunID, err = checkRunID(p.RunID); err != nil {
		return schedrpc.FireResult{}, err
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodScheduleTrigger, p, func(ctx context.Context) (schedrpc.FireResult, error) {
		res, idx, err := propose[fsm.FireResult](ctx, a.prop, &fsm.ScheduleTrigger{ID: p.ID, RunID: p.RunID}, alone)
		if err != nil {
			return schedrpc.FireResult{}, err
		}
		return schedrpc.FireResult{Changed: res.Changed, Outcome: string(res.Outcome), RunID: res.RunID, Index: idx}, nil
	})
}

func (a *Agent) scheduleDelete(ctx context.Context, p schedrpc.IDParams) (rpc.ChangedResult, error) {
	if err := checkScheduleID(p.ID); err != nil {
		return rpc.ChangedResult{}, err
	}
	return a.changeOnLeader(ctx, rpc.MethodScheduleDelete, p, &fsm.ScheduleDelete{ID: p.ID})
}
