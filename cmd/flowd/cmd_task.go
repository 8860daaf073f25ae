package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

func init() { commands = append(commands, taskCommand) }

var taskCommand = &cli.Command{
	Name:  "task",
	Usage: "inspect tasks",
	Subcommands: []*cli.Command{
		{
			Name:      "get",
			Usage:     "show a task: every attempt, its lease, deps and compensation",
			ArgsUsage: "RUN/KEY or RUN KEY (RUN: the run id or any unique part of it)",
			Action:    taskGetAction,
		},
		taskListCommand,
	},
}

func taskGetAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 2, "RUN/KEY or RUN KEY"); err != nil {
		return err
	}
	// RUN/KEY or, like task logs, RUN KEY.
	id := strings.TrimSpace(cCtx.Args().First())
	run, key, ok := strings.Cut(id, "/")
	if cCtx.NArg() == 2 {
		run, key, ok = id, strings.TrimSpace(cCtx.Args().Get(1)), !strings.Contains(id, "/")
	}
	if !ok || run == "" || key == "" {
		return usageErr(cCtx, "task id %q: want RUN/KEY or RUN KEY, e.g. 3f9a1c2b7d4e/extract or 3f9a1c2b7d4e extract", strings.Join(cCtx.Args().Slice(), " "))
	}
	var t *rpc.Task
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		t, err = c.TaskGet(ctx, run+"/"+key)
		return err
	}); err != nil {
		return err
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, t)
	}
	p := newPainter(cCtx, w)
	tw := newTable(w)
	row(tw, "Task:", t.ID)
	row(tw, "Run:", t.RunID+"  (short "+shortID(t.RunID)+")")
	row(tw, "Key:", t.Key)
	row(tw, "Type:", t.Type)
	row(tw, "Queue:", t.Queue)
	row(tw, "State:", p.state(string(t.State)))
	row(tw, "Attempt:", fmt.Sprintf("%d of %d", t.Attempt, t.MaxAttempts))
	row(tw, "Retry:", retryText(t.Retry))
	if t.WaitingOn != nil {
		row(tw, "Waiting on:", waitingText(*t.WaitingOn))
	}
	if t.Priority != 0 {
		row(tw, "Priority:", t.Priority)
	}
	deps := "-"
	if len(t.Deps) > 0 {
		deps = strings.Join(t.Deps, ", ")
	}
	row(tw, "Deps:", deps)
	if t.SpawnedBy != "" {
		row(tw, "Spawned by:", t.SpawnedBy)
	}
	lease := "-"
	if t.LeaseOwner != "" {
		lease = fmt.Sprintf("held by %s, token %d, expires %s", t.LeaseOwner, t.FencingToken, stamp(t.LeaseExpiresAt))
	}
	row(tw, "Lease:", lease)
	if !t.RetryAt.IsZero() {
		row(tw, "Retry at:", stamp(t.RetryAt))
	}
	if t.Waiting {
		row(tw, "Waiting:", "for signal "+t.Signal+" (`flowd run signal "+t.RunID+" "+t.Key+" --data JSON`)")
	}
	if !t.NotBefore.IsZero() {
		row(tw, "Not before:", stamp(t.NotBefore))
	}
	if t.TimeoutMS > 0 || t.ScheduleToStartMS > 0 {
		timeouts := fmt.Sprintf("timeout_ms %d, schedule_to_start_ms %d", t.TimeoutMS, t.ScheduleToStartMS)
		if t.ScheduleToStartPolicy != "" {
			timeouts += " (policy " + t.ScheduleToStartPolicy + ")"
		}
		row(tw, "Timeouts:", timeouts)
	}
	if t.Late {
		row(tw, "Late:", "yes: ready past schedule_to_start_ms without a claim (policy alert); start a worker for queue "+t.Queue+" and type "+t.Type)
	}
	if !t.DeadlineAt.IsZero() {
		row(tw, "Deadline:", stamp(t.DeadlineAt))
	}
	if t.SignalID != "" {
		row(tw, "Signal id:", t.SignalID)
	}
	row(tw, "Ready at:", stamp(t.ReadyAt))
	row(tw, "Started:", stamp(t.StartedAt))
	row(tw, "Finished:", stamp(t.FinishedAt))
	comp := "-"
	if t.RevertType != "" {
		comp = "revert handler " + t.RevertType
	}
	if c := t.Compensation; c != nil {
		comp += fmt.Sprintf("; %s, attempt %d", c.Phase, c.Attempt)
		if !c.RetryAt.IsZero() {
			comp += ", retry " + stamp(c.RetryAt)
		}
		if c.Error != "" {
			comp += ", error: " + oneLine(c.Error, 100)
		}
	}
	row(tw, "Compensation:", comp)
	if len(t.Input) > 0 {
		row(tw, "Input:", oneLine(string(t.Input), 120))
	}
	if len(t.Result) > 0 {
		row(tw, "Result:", oneLine(string(t.Result), 120))
	}
	if t.Reused {
		row(tw, "Reused:", "yes (succeeded in the parent run)")
	}
	if t.Error != "" {
		row(tw, "Error:", oneLine(t.Error, 200))
	}
	tw.Flush()
	fmt.Fprintln(w)
	if len(t.Attempts) == 0 {
		fmt.Fprintln(w, "no attempts yet")
		return nil
	}
	tw = newTable(w)
	row(tw, "#", "WORKER", "TOKEN", "CLAIMED", "ENDED", "OUTCOME", "ERROR")
	for _, a := range t.Attempts {
		n := fmt.Sprint(a.N)
		if a.Compensation {
			n += " (revert)"
		}
		ended := "-"
		if !a.EndedAt.IsZero() {
			ended = a.EndedAt.UTC().Format("15:04:05.000") + " (+" + human(a.EndedAt.Sub(a.ClaimedAt)) + ")"
		}
		row(tw, n, dash(a.Worker), a.FencingToken, a.ClaimedAt.UTC().Format("2006-01-02T15:04:05.000Z"), ended,
			dash(a.Outcome), dash(oneLine(a.Error, 80)))
	}
	return tw.Flush()
}
