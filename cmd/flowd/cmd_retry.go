package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

const usageRetry = "run a failed or cancelled run again in place: its failed and cancelled tasks (or --task KEY) go back to ready, the rest keep their results"

var runRetryCommand = &cli.Command{
	Name:      "retry",
	Usage:     usageRetry,
	ArgsUsage: idArgs,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "task", Usage: "retry only this failed or cancelled task (`KEY`; the tasks its failure left cancelled or skipped come back too)",
			EnvVars: []string{"FLOWD_RUN_RETRY_TASK"}},
		&cli.BoolFlag{Name: "wait", Aliases: []string{"w"}, Usage: "wait until the run is done again", EnvVars: []string{"FLOWD_RUN_RETRY_WAIT"}},
		waitTimeoutFlag("FLOWD_RUN_RETRY_WAIT_TIMEOUT", "FLOWD_RUN_RETRY_TIMEOUT"),
	},
	Action: runRetryAction,
}

func runRetryAction(cCtx *cli.Context) error {
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
	res, err := c.RetryRun(ctx, rpc.RetryParams{ID: id, Task: cCtx.String("task")})
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
