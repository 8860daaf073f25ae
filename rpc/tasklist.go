package rpc

import (
	"context"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// TaskListParams of task.list: every filter given must hold. A page may
// hold fewer tasks than limit and still have a next_cursor (the agent
// examines a bounded number of runs per page): keep paging.
type TaskListParams struct {
	State          domain.TaskState `json:"state,omitempty"`
	Queue          string           `json:"queue,omitempty"`
	Type           string           `json:"type,omitempty"`
	Workflow       string           `json:"workflow,omitempty"`
	FinishedAfter  time.Time        `json:"finished_after,omitzero"`
	FinishedBefore time.Time        `json:"finished_before,omitzero"`
	Limit          int              `json:"limit,omitempty"`
	Cursor         string           `json:"cursor,omitempty"`
}

// TaskListResult of task.list: tasks newest run first, by key within a run.
type TaskListResult struct {
	Tasks      []Task `json:"tasks"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// TaskList calls task.list.
func (c *Client) TaskList(ctx context.Context, p TaskListParams) (*TaskListResult, error) {
	return call[TaskListResult](ctx, c.CallIdempotent, MethodTaskList, p)
}
