package daemon

import (
	"context"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/rpc"
)

// taskLister is the state's task listing (fsm.FSM.ListTasks).
type taskLister interface {
	ListTasks(q fsm.TaskFilter, limit int, cursor string) ([]*fsm.Task, string, error)
}

// taskList answers task.list from this agent's state: tasks across runs
// by state, queue, type, workflow and finish time (the dead-letter view:
// state failed).
func (a *Agent) taskList(_ context.Context, p rpc.TaskListParams) (rpc.TaskListResult, error) {
	if p.State != "" && !p.State.Valid() {
		return rpc.TaskListResult{}, invalid("state %q is not a task state", p.State)
	}
	if p.Limit < 0 || p.Limit > 1000 {
		return rpc.TaskListResult{}, invalid("limit %d must be 1-1000 (0: 100)", p.Limit)
	}
	l, ok := a.state.(taskLister)
	if !ok {
		return rpc.TaskListResult{}, invalid("task.list is not served by this agent")
	}
	q := fsm.TaskFilter{State: p.State, Queue: p.Queue, Type: p.Type, Workflow: p.Workflow}
	if !p.FinishedAfter.IsZero() {
		q.FinishedAfter = p.FinishedAfter.UnixMilli()
	}
	if !p.FinishedBefore.IsZero() {
		q.FinishedBefore = p.FinishedBefore.UnixMilli()
	}
	tasks, next, err := l.ListTasks(q, p.Limit, p.Cursor)
	if err != nil {
		return rpc.TaskListResult{}, err
	}
	out := rpc.TaskListResult{Tasks: make([]rpc.Task, 0, len(tasks)), NextCursor: next}
	for _, t := range tasks {
		out.Tasks = append(out.Tasks, toTask(t, false))
	}
	return out, nil
}
