package daemon

import (
	"context"
	"encoding/json"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Signals complete waiting tasks (task.signal, run.signal); a delayed
// submit's start time is checked here (checkDelay).

// checkDelay validates run.submit's start_at / delay_ms and returns
// start_at in ms since the epoch (0 = none).
func checkDelay(startAt string, delayMS int64) (int64, error) {
	if startAt != "" && delayMS != 0 {
		return 0, invalid("give start_at or delay_ms, not both")
	}
	if delayMS < 0 || delayMS > domain.MaxTimeoutMS {
		return 0, invalid("delay_ms %d must be between 0 and %d (365 days)", delayMS, int64(domain.MaxTimeoutMS))
	}
	if startAt == "" {
		return 0, nil
	}
	t, err := time.Parse(time.RFC3339Nano, startAt)
	if err != nil {
		return 0, invalid("start_at %q is not an RFC 3339 time (like 2026-12-01T08:00:00Z): %v", startAt, err)
	}
	return max(t.UnixMilli(), 1), nil
}

func checkPayload(p json.RawMessage, signalID string) error {
	if len(p) > 0 && !json.Valid(p) {
		return invalid("payload is not valid JSON")
	}
	if len(signalID) > fsm.MaxClaimIDBytes {
		return invalid("signal_id must be at most %d bytes", fsm.MaxClaimIDBytes)
	}
	return nil
}

func (a *Agent) taskSignal(ctx context.Context, p rpc.TaskSignalParams) (rpc.SignalResult, error) {
	if p.TaskID != "" && p.RunID == "" && p.Key == "" {
		run, key, ok := fsm.SplitTaskID(p.TaskID)
		if !ok {
			return rpc.SignalResult{}, invalid("task_id %q must look like <run id>/<task key>", p.TaskID)
		}
		p.RunID, p.Key = run, key
	}
	if p.RunID == "" || p.Key == "" {
		return rpc.SignalResult{}, invalid("run_id and key (or task_id) are required: the wait task to signal")
	}
	if err := checkPayload(p.Payload, p.SignalID); err != nil {
		return rpc.SignalResult{}, err
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodTaskSignal, p, func(ctx context.Context) (rpc.SignalResult, error) {
		run, err := a.resolve(p.RunID)
		if err != nil {
			return rpc.SignalResult{}, err
		}
		cmd := &fsm.TaskSignal{TaskID: run + "/" + p.Key, Token: p.FencingToken, Payload: p.Payload, SignalID: p.SignalID}
		res, idx, err := propose[fsm.SignalResult](ctx, a.prop, cmd, alone)
		if err != nil {
			return rpc.SignalResult{}, err
		}
		return rpc.SignalResult{Accepted: res.Accepted, Tasks: res.Tasks, State: string(res.State), Index: idx}, nil
	})
}

func (a *Agent) runSignal(ctx context.Context, p rpc.RunSignalParams) (rpc.SignalResult, error) {
	if p.RunID == "" || p.Name == "" {
		return rpc.SignalResult{}, invalid("run_id and name are required: the run and the signal its wait tasks listen for")
	}
	if err := checkPayload(p.Payload, p.SignalID); err != nil {
		return rpc.SignalResult{}, err
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodRunSignal, p, func(ctx context.Context) (rpc.SignalResult, error) {
		run, err := a.resolve(p.RunID)
		if err != nil {
			return rpc.SignalResult{}, err
		}
		cmd := &fsm.RunSignal{RunID: run, Name: p.Name, Payload: p.Payload, SignalID: p.SignalID}
		res, idx, err := propose[fsm.SignalResult](ctx, a.prop, cmd, alone)
		if err != nil {
			return rpc.SignalResult{}, err
		}
		return rpc.SignalResult{Accepted: res.Accepted, Tasks: res.Tasks, Index: idx}, nil
	})
}
