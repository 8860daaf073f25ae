package daemon

import (
	"context"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/rpc"
)

// runRetry takes a failed or cancelled run back to running in the same
// run (fsm/apply_retry.go): the state machine decides what may be retried
// and refuses the rest with the reason, on the leader.
func (a *Agent) runRetry(ctx context.Context, p rpc.RetryParams) (rpc.RetryResult, error) {
	if p.ID == "" {
		return rpc.RetryResult{}, invalid("id is required")
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodRunRetry, p, func(ctx context.Context) (rpc.RetryResult, error) {
		id, err := a.resolve(p.ID)
		if err != nil {
			return rpc.RetryResult{}, err
		}
		res, idx, err := propose[fsm.RetryResult](ctx, a.prop, &fsm.RunRetry{ID: id, Task: p.Task}, alone)
		if err != nil {
			return rpc.RetryResult{}, err
		}
		return rpc.RetryResult{ID: id, State: res.State, Tasks: res.Tasks, Index: idx}, nil
	})
}
