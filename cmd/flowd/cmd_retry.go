package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

const usageRetry = "run a failed or cancelled run again in place: its failed and cancelled tasks (or --task KEY) go back to ready, the rest keep their results"

var runRetryCommand = &cli.Command{
	Name:      "retry",
	Usage:     usageRetry,
	ArgsUsage: idArgs + "  |  --all-failed --workflow NAME",
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "all-failed", Usage: "retry every failed run of --workflow (bulk; no RUN argument)", EnvVars: []string{"FLOWD_RUN_RETRY_ALL_FAILED"}},
		&cli.StringFlag{Name: "workflow", Usage: "with --all-failed: the `WORKFLOW` whose failed runs are retried", EnvVars: []string{"FLOWD_RUN_RETRY_WORKFLOW"}},
		&cli.StringFlag{Name: "task", Usage: "retry only this failed or cancelled task (`KEY`; the tasks its failure left cancelled or skipped come back too)",
			EnvVars: []string{"FLOWD_RUN_RETRY_TASK"}},
		&cli.BoolFlag{Name: "wait", Aliases: []string{"w"}, Usage: "wait until the run is done again", EnvVars: []string{"FLOWD_RUN_RETRY_WAIT"}},
		waitTimeoutFlag("FLOWD_RUN_RETRY_WAIT_TIMEOUT", "FLOWD_RUN_RETRY_TIMEOUT"),
	},
	Action: runRetryAction,
}

func runRetryAction(cCtx *cli.Context) error {
	if cCtx.Bool("all-failed") {
		return retryAllFailed(cCtx)
	}
	id, err := idArg(cCtx)
	if err != nil {
		return err
	}
	c, err := newClient(cCtx)
	if err != nil {
		return err
	}
	defer c.Close()
	start := time.Now()
	ctx, cancel := waitCallCtx(cCtx)
	res, err := c.RunRetry(ctx, rpc.RetryParams{ID: id, Task: cCtx.String("task")})
	cancel()
	if err != nil {
		return err
	}
	wait := cCtx.Bool("wait")
	if jsonOut(cCtx) && !wait {
		return printJSON(cCtx.App.Writer, res)
	}
	if !jsonOut(cCtx) {
		fmt.Fprintf(cCtx.App.Writer, "run %s retried: %s again, now %s\n", shortID(res.ID),
			strings.Join(res.Tasks, ", "), StateLabel(string(res.State)))
	}
	if !wait {
		return nil
	}
	return waitAndReport(cCtx, c, res.ID, cCtx.Duration("wait-timeout"), start, false)
}

// retryAllFailed retries every failed run of a workflow (run.list, then
// run.retry for each): the bulk retry of the dead-letter view.
func retryAllFailed(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no RUN with --all-failed"); err != nil {
		return err
	}
	wf := cCtx.String("workflow")
	if wf == "" {
		return usageErr(cCtx, "--all-failed needs --workflow NAME (the workflow whose failed runs are retried)")
	}
	if cCtx.String("task") != "" || cCtx.Bool("wait") {
		return usageErr(cCtx, "--all-failed retries whole runs: drop --task and --wait")
	}
	c, err := newClient(cCtx)
	if err != nil {
		return err
	}
	defer c.Close()
	var ids []string
	p := rpc.ListParams{State: domain.RunFailed, Workflow: wf, Limit: 1000}
	for {
		res, err := c.RunList(cCtx.Context, p)
		if err != nil {
			return err
		}
		for _, r := range res.Runs {
			ids = append(ids, r.ID)
		}
		if res.NextCursor == "" {
			break
		}
		p.Cursor = res.NextCursor
	}
	retried, failed := 0, 0
	w := cCtx.App.Writer
	for _, id := range ids {
		if _, err := c.RunRetry(cCtx.Context, rpc.RetryParams{ID: id}); err != nil {
			failed++
			fmt.Fprintf(cCtx.App.ErrWriter, "run %s: %v\n", shortID(id), err)
			continue
		}
		retried++
	}
	if jsonOut(cCtx) {
		return printJSON(w, map[string]any{"workflow": wf, "retried": retried, "refused": failed})
	}
	fmt.Fprintf(w, "%d failed run(s) of %s retried", retried, wf)
	if failed > 0 {
		fmt.Fprintf(w, ", %d refused (see above)", failed)
	}
	fmt.Fprintln(w)
	if failed > 0 {
		return exitWith(exitRunUnsuc)
	}
	return nil
}
