package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// flowd task list: tasks across runs (task.list), the dead-letter view
// with --state failed.
var taskListCommand = &cli.Command{
	Name:  "list",
	Usage: "list tasks across runs, newest run first (--state failed: the dead-letter view; retry with `flowd run retry`)",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "state", Usage: "only tasks in this `STATE`", EnvVars: []string{"FLOWD_TASK_LIST_STATE"}},
		&cli.StringFlag{Name: "queue", Usage: "only tasks of this `QUEUE`", EnvVars: []string{"FLOWD_TASK_LIST_QUEUE"}},
		&cli.StringFlag{Name: "type", Usage: "only tasks of this `TYPE`", EnvVars: []string{"FLOWD_TASK_LIST_TYPE"}},
		&cli.StringFlag{Name: "workflow", Usage: "only tasks of runs of this `WORKFLOW`", EnvVars: []string{"FLOWD_TASK_LIST_WORKFLOW"}},
		&cli.DurationFlag{Name: "since", Usage: "only tasks that settled in the last `DURATION`", EnvVars: []string{"FLOWD_TASK_LIST_SINCE"}},
		&cli.IntFlag{Name: "limit", Value: 100, Usage: "at most `N` tasks (1-1000; pages on until it has them)", EnvVars: []string{"FLOWD_TASK_LIST_LIMIT"}},
	},
	Action: taskListAction,
}

func taskListAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	p := rpc.TaskListParams{State: domain.TaskState(cCtx.String("state")), Queue: cCtx.String("queue"),
		Type: cCtx.String("type"), Workflow: cCtx.String("workflow")}
	if p.State != "" && !slices.Contains(domain.TaskStates, p.State) {
		return usageErr(cCtx, "--state %q: want one of %v", p.State, domain.TaskStates)
	}
	if d := cCtx.Duration("since"); d > 0 {
		p.FinishedAfter = time.Now().Add(-d)
	}
	limit := cCtx.Int("limit")
	if limit < 1 || limit > 1000 {
		return usageErr(cCtx, "--limit %d: want 1-1000", limit)
	}
	c, err := newClient(cCtx)
	if err != nil {
		return err
	}
	defer c.Close()
	var tasks []rpc.Task
	for len(tasks) < limit {
		p.Limit = limit - len(tasks)
		res, err := c.TaskList(cCtx.Context, p)
		if err != nil {
			return err
		}
		tasks = append(tasks, res.Tasks...)
		if res.NextCursor == "" {
			break
		}
		p.Cursor = res.NextCursor
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, map[string]any{"tasks": tasks})
	}
	if len(tasks) == 0 {
		fmt.Fprintln(w, "no tasks")
		return nil
	}
	pt := newPainter(cCtx, w)
	tw := newTable(w)
	row(tw, "TASK", pt.header("STATE"), "TYPE", "QUEUE", "ATTEMPT", "FINISHED", "ERROR")
	for _, t := range tasks {
		finished := "-"
		if !t.FinishedAt.IsZero() {
			finished = t.FinishedAt.Local().Format(time.DateTime)
		}
		errText := "-"
		if t.Error != "" {
			errText = oneLine(t.Error, 60)
		}
		row(tw, shortID(t.RunID)+"/"+t.Key, pt.state(string(t.State)), t.Type, t.Queue,
			fmt.Sprintf("%d/%d", t.Attempt, t.MaxAttempts), finished, errText)
	}
	return tw.Flush()
}
