package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

func init() { commands = append(commands, queueCommand) }

var queueCommand = &cli.Command{
	Name:  "queue",
	Usage: "list queues, pause and resume them, cap their concurrency",
	Subcommands: []*cli.Command{
		{Name: "list", Usage: "queues with ready and running tasks, caps, pauses and breakers", Action: queueListAction},
		queuePauseCommand("pause", true),
		queuePauseCommand("resume", false),
		{
			Name:      "set",
			Usage:     "set a queue's concurrency cap (0 = unlimited, or auto between --min and --max) or rate limit (tasks per second)",
			ArgsUsage: "NAME",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "concurrency", Aliases: []string{"c"}, Usage: "at most `N` running tasks (0 = unlimited), or auto: the leader adjusts the cap from completion latency"},
				&cli.IntFlag{Name: "min", Usage: "with --concurrency auto: the cap's floor `N` (at least 1)"},
				&cli.IntFlag{Name: "max", Usage: "with --concurrency auto: the cap's ceiling `N` (where it starts)"},
				&cli.DurationFlag{Name: "target-latency", Usage: "with --concurrency auto: claim-to-completion latency `D` to stay under (default 1s)"},
				&cli.Float64Flag{Name: "rate", Usage: "lease at most `R` tasks per second (0 removes the limit)"},
				&cli.IntFlag{Name: "burst", Usage: "with --rate: at most `B` leases at once after a quiet spell (default 1: never more than R in any second)"},
				&cli.StringFlag{Name: "type", Usage: "with --rate: limit only this task `TYPE`'s tasks in the queue"},
				createFlag,
			},
			Action: queueSetAction,
		},
		{
			Name:      "delete",
			Usage:     "forget a queue that holds no ready or running task (a typo in queue set, say)",
			ArgsUsage: "NAME",
			Action:    queueDeleteAction,
		},
	},
}

func queueDeleteAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 1, "NAME"); err != nil {
		return err
	}
	q := cCtx.Args().First()
	var res *rpc.ChangedResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		res, err = c.QueueDelete(ctx, q)
		return err
	}); err != nil {
		return err
	}
	return printChanged(cCtx, res, "queue "+q+" deleted")
}

func queueListAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	res, err := fetch(cCtx, func(ctx context.Context, c *rpc.Client) (*rpc.QueueListResult, error) { return c.QueueList(ctx) })
	if err != nil {
		return err
	}
	return printList(cCtx, res, len(res.Queues), "no queues yet (a queue appears with its first task)", func(tw *tabwriter.Writer) {
		row(tw, "QUEUE", "READY", "RUNNING", "CONCURRENCY", "RATE LIMIT", "PAUSED", "OLDEST READY", "BREAKERS")
		for _, q := range res.Queues {
			conc := concurrencyText(q)
			paused := "no"
			if q.Paused {
				paused = "‖ yes"
			}
			if len(q.PausedRuns) > 0 {
				var ids []string
				for _, r := range q.PausedRuns {
					ids = append(ids, shortID(r))
				}
				paused += " (runs " + strings.Join(ids, ",") + ")"
			}
			oldest := "-"
			if q.OldestReadyMS > 0 {
				oldest = human(time.Duration(q.OldestReadyMS) * time.Millisecond)
			}
			var bs []string
			for _, b := range q.Breakers {
				bs = append(bs, fmt.Sprintf("%s:%s(%d)", b.Type, b.State, b.Failures))
			}
			ready := strconv.Itoa(q.Ready)
			if q.PausedReady > 0 {
				ready += fmt.Sprintf(" (+%d paused)", q.PausedReady) // held by a pause for their run
			}
			row(tw, q.Name, ready, q.Running, conc, rateLimitText(q), paused, oldest, dash(strings.Join(bs, " ")))
		}
	})
}

func queuePauseCommand(name string, pause bool) *cli.Command {
	usage := "pause a queue: its ready tasks are not dispatched (running ones finish)"
	if !pause {
		usage = "resume a paused queue"
	}
	return &cli.Command{
		Name:      name,
		Usage:     usage + "; with --run, only for that run",
		ArgsUsage: "NAME",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "run", Usage: "only this run's tasks in the queue (run `ID`)"},
		}, pauseCreate(pause)...),
		Action: func(cCtx *cli.Context) error {
			if err := needArgs(cCtx, 1, 1, "NAME"); err != nil {
				return err
			}
			q := cCtx.Args().First()
			if pause {
				if err := checkQueueInUse(cCtx, q); err != nil {
					return err
				}
			}
			var res *rpc.ChangedResult
			if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
				res, err = c.QueuePause(ctx, q, cCtx.String("run"), pause)
				return err
			}); err != nil {
				return err
			}
			return printChanged(cCtx, res, fmt.Sprintf("queue %s %sd%s", q, name, forRun(cCtx.String("run"))))
		},
	}
}

func forRun(id string) string {
	if id == "" {
		return ""
	}
	return " for run " + id
}

// printChanged reports a verb's result; changed false is not an error.
func printChanged(cCtx *cli.Context, res *rpc.ChangedResult, what string) error {
	if jsonOut(cCtx) {
		return printJSON(cCtx.App.Writer, res)
	}
	if res.Changed {
		fmt.Fprintln(cCtx.App.Writer, what)
	} else {
		fmt.Fprintln(cCtx.App.Writer, "unchanged: "+what+" already")
	}
	return nil
}

// createFlag lets queue set and pause name a queue no task has used yet
// (configuring it before its first task); without it such a name is
// refused as a likely typo, which would otherwise create a queue that
// stays until `queue delete`.
var createFlag = &cli.BoolFlag{Name: "create", Usage: "the queue may be new: configure it before any task uses it (without it, a name no task uses is refused as a typo)"}

func pauseCreate(pause bool) []cli.Flag {
	if pause {
		return []cli.Flag{createFlag}
	}
	return nil
}

// checkQueueInUse refuses a queue name that no task has used (it is not in
// queue.list), unless --create is given.
func checkQueueInUse(cCtx *cli.Context, q string) error {
	if cCtx.Bool("create") {
		return nil
	}
	var known []string
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) error {
		res, err := c.QueueList(ctx)
		if err != nil {
			return err
		}
		for _, x := range res.Queues {
			if x.Name == q {
				known = nil
				return nil
			}
			known = append(known, x.Name)
		}
		if len(known) == 0 {
			known = []string{"none yet"}
		}
		return nil
	}); err != nil {
		return err
	}
	if known == nil {
		return nil
	}
	return usageErr(cCtx, "no task uses queue %q (queues in use: %s): check the name, or add --create to configure a queue before its first task", q, strings.Join(known, ", "))
}

func queueSetAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 1, "NAME"); err != nil {
		return err
	}
	if err := checkQueueInUse(cCtx, cCtx.Args().First()); err != nil {
		return err
	}
	if cCtx.IsSet("rate") || cCtx.IsSet("burst") || cCtx.IsSet("type") {
		return queueSetRateAction(cCtx)
	}
	if !cCtx.IsSet("concurrency") {
		return usageErr(cCtx, "--concurrency N (0 = unlimited), --concurrency auto --min N --max M, or --rate R (tasks per second) is required")
	}
	n, auto, err := concurrencyFlag(cCtx)
	if err != nil {
		return err
	}
	if auto {
		return queueSetAutoAction(cCtx)
	}
	if n < 0 {
		return usageErr(cCtx, "--concurrency %d: want 0 (unlimited) or more", n)
	}
	q := cCtx.Args().First()
	var res *rpc.ChangedResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		res, err = c.QueueSet(ctx, q, n)
		return err
	}); err != nil {
		return err
	}
	limit := fmt.Sprint(n)
	if n == 0 {
		limit = "unlimited"
	}
	return printChanged(cCtx, res, fmt.Sprintf("queue %s concurrency set to %s", q, limit))
}
