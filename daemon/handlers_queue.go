package daemon

import (
	"context"
	"sort"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/rpc"
)

// Queue, settings and worker methods.

// queueReader is what the queue and settings handlers read (the adaptive
// concurrency and rate-limit reports too).
type queueReader interface {
	Queues() ([]fsm.QueueInfo, error)
	Breakers() ([]fsm.Breaker, error)
	Settings() (fsm.Settings, error)
}

func (a *Agent) queueList(context.Context, struct{}) (rpc.QueueListResult, error) {
	qs, err := a.state.Queues()
	if err != nil {
		return rpc.QueueListResult{}, err
	}
	bs, err := a.state.Breakers()
	if err != nil {
		return rpc.QueueListResult{}, err
	}
	now := a.state.Now()
	if wall := time.Now().UnixMilli(); wall > now {
		now = wall
	}
	out := rpc.QueueListResult{Queues: []rpc.Queue{}, Breakers: []rpc.Breaker{}}
	for _, q := range qs {
		rq := rpc.Queue{Name: q.Name, Ready: q.Ready, Running: q.Running, Concurrency: q.Concurrency,
			Paused: q.Paused, PausedRuns: q.PausedRuns, PausedReady: q.PausedReady, Types: q.Types, Breakers: []rpc.Breaker{}}
		if q.OldestReadyAt != 0 {
			rq.OldestReadyMS = max(0, now-q.OldestReadyAt)
		}
		for _, b := range q.Breakers {
			rq.Breakers = append(rq.Breakers, toBreaker(b))
		}
		addRateLimits(&rq, q.QueueState, now)
		if q.Auto != nil {
			rq.Auto = &rpc.QueueAuto{Min: q.Auto.Min, Max: q.Auto.Max, TargetLatencyMS: q.Auto.TargetLatencyMS}
		}
		out.Queues = append(out.Queues, rq)
	}
	for _, b := range bs {
		out.Breakers = append(out.Breakers, toBreaker(b))
	}
	sort.Slice(out.Queues, func(i, j int) bool { return out.Queues[i].Name < out.Queues[j].Name })
	return out, nil
}

func (a *Agent) queuePause(pause bool) func(context.Context, rpc.QueuePauseParams) (rpc.ChangedResult, error) {
	method := rpc.MethodQueueResume
	if pause {
		method = rpc.MethodQueuePause
	}
	return func(ctx context.Context, p rpc.QueuePauseParams) (rpc.ChangedResult, error) {
		if p.Name == "" {
			return rpc.ChangedResult{}, invalid("name (the queue) is required")
		}
		ctx, cancel := withTimeout(ctx, writeTimeout)
		defer cancel()
		return onLeader(ctx, a.proxy, method, p, func(ctx context.Context) (rpc.ChangedResult, error) {
			runID := ""
			if p.RunID != "" {
				id, err := a.resolve(p.RunID)
				if err != nil {
					return rpc.ChangedResult{}, err
				}
				runID = id
			}
			res, idx, err := propose[fsm.ChangedResult](ctx, a.prop, &fsm.QueuePause{Name: p.Name, RunID: runID, Paused: pause}, alone)
			if err != nil {
				return rpc.ChangedResult{}, err
			}
			return rpc.ChangedResult{Changed: res.Changed, Index: idx}, nil
		})
	}
}

func (a *Agent) queueSet(ctx context.Context, p rpc.QueueSetParams) (rpc.ChangedResult, error) {
	if p.Name == "" {
		return rpc.ChangedResult{}, invalid("name (the queue) is required")
	}
	if err := checkAutoParams(p); err != nil {
		return rpc.ChangedResult{}, err
	}
	if p.Rate != nil || p.Type != "" || p.Burst != 0 {
		return a.queueSetRate(ctx, p)
	}
	return a.changeOnLeader(ctx, rpc.MethodQueueSet, p, concurrencyCmd(p))
}

func (a *Agent) queueDelete(ctx context.Context, p rpc.QueueDeleteParams) (rpc.ChangedResult, error) {
	if p.Name == "" {
		return rpc.ChangedResult{}, invalid("name (the queue) is required")
	}
	return a.changeOnLeader(ctx, rpc.MethodQueueDelete, p, &fsm.QueueDelete{Name: p.Name})
}

// changeOnLeader proposes cmd, which answers a ChangedResult, on the
// leader (forwarding method with params from a follower), within the
// write budget.
func (a *Agent) changeOnLeader(ctx context.Context, method string, params any, cmd fsm.Command) (rpc.ChangedResult, error) {
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, method, params, func(ctx context.Context) (rpc.ChangedResult, error) {
		res, idx, err := propose[fsm.ChangedResult](ctx, a.prop, cmd, alone)
		if err != nil {
			return rpc.ChangedResult{}, err
		}
		return rpc.ChangedResult{Changed: res.Changed, Index: idx}, nil
	})
}

// toSettings reports effective values (defaults filled in); 0 for
// max_running_runs still means unlimited.
func toSettings(s fsm.Settings) rpc.Settings {
	s = s.Effective()
	return rpc.Settings{MaxRunningRuns: &s.MaxRunningRuns, RetentionMS: &s.RetentionMS,
		BreakerFailures: &s.BreakerFailures, BreakerCooldownMS: &s.BreakerCooldownMS, EventWindow: &s.EventWindow, DefaultMaxAttempts: &s.DefaultMaxAttempts}
}

func (a *Agent) settingsGet(context.Context, struct{}) (rpc.Settings, error) {
	s, err := a.state.Settings()
	return toSettings(s), err
}

func (a *Agent) settingsSet(ctx context.Context, p rpc.Settings) (rpc.Settings, error) {
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodSettingsSet, p, func(ctx context.Context) (rpc.Settings, error) {
		res, _, err := propose[fsm.Settings](ctx, a.prop, &fsm.SettingsSet{MaxRunningRuns: p.MaxRunningRuns, RetentionMS: p.RetentionMS,
			BreakerFailures: p.BreakerFailures, BreakerCooldownMS: p.BreakerCooldownMS, EventWindow: p.EventWindow, DefaultMaxAttempts: p.DefaultMaxAttempts}, alone)
		if err != nil {
			return rpc.Settings{}, err
		}
		return toSettings(*res), nil
	})
}

func (a *Agent) workersList(ctx context.Context, p struct{}) (rpc.WorkersResult, error) {
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodWorkersList, p, func(context.Context) (rpc.WorkersResult, error) {
		return a.workersLocal(), nil
	})
}
