package rpc

import (
	"context"

	"github.com/flowd/flowd/fsm/domain"
)

// RetryParams of run.retry.
type RetryParams struct {
	ID string `json:"id"`
	// Task, when set, is the one failed or cancelled task to run again.
	Task string `json:"task,omitempty"`
}

// RetryResult of run.retry: the run's state afterwards and the tasks taken
// back to pending.
type RetryResult struct {
	ID    string          `json:"id"`
	State domain.RunState `json:"state"`
	Tasks []string        `json:"tasks"`
	Index uint64          `json:"index,omitempty"`
}

// RunRetry calls run.retry. It is not retried by the client: a second
// retry of the same run is refused once the first took effect (the run is
// running again).
func (c *Client) RunRetry(ctx context.Context, p RetryParams) (*RetryResult, error) {
	return call[RetryResult](ctx, c.Call, MethodRunRetry, p)
}
