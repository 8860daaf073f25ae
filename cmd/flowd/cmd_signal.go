package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

// flowd run signal: complete waiting tasks (type wait) with a payload.

func init() { runCommand.Subcommands = append(runCommand.Subcommands, runSignalCommand) }

var runSignalCommand = &cli.Command{
	Name:  "signal",
	Usage: "complete a waiting task (type wait) with a payload: its result, which its dependents receive",
	Description: "flowd run signal RUN KEY --data JSON   signals the wait task KEY of RUN (task.signal)\n" +
		"flowd run signal RUN --name NAME --data JSON   signals every wait task of RUN listening for NAME\n" +
		"                                                (its spec's signal, or its key; run.signal)\n" +
		"Flags go before RUN. A signal id (default: a new one) makes a retried signal safe.",
	ArgsUsage: "RUN [KEY]",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "data", Aliases: []string{"d"}, Usage: "the payload: `JSON` inline, or @file (@- for stdin)"},
		&cli.StringFlag{Name: "name", Usage: "signal every wait task of the run listening for `NAME` (instead of KEY)"},
		&cli.StringFlag{Name: "signal-id", Usage: "an `ID` that makes the signal idempotent (default: a new one per call)"},
	},
	Action: runSignalAction,
}

func runSignalAction(cCtx *cli.Context) error {
	name := cCtx.String("name")
	if name == "" {
		if err := needArgs(cCtx, 2, 2, "RUN KEY"); err != nil {
			return err
		}
	} else if err := needArgs(cCtx, 1, 1, "RUN (with --name, no KEY)"); err != nil {
		return err
	}
	run := strings.TrimSpace(cCtx.Args().Get(0))
	key := strings.TrimSpace(cCtx.Args().Get(1))
	data, err := jsonArg(cCtx, "--data", cCtx.String("data"))
	if err != nil {
		return err
	}
	sid := cCtx.String("signal-id")
	if sid == "" {
		sid = rpc.NewRequestID()
	}
	var res *rpc.SignalResult
	err = withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		if name != "" {
			res, err = c.RunSignal(ctx, rpc.RunSignalParams{RunID: run, Name: name, Payload: data, SignalID: sid})
		} else {
			res, err = c.TaskSignal(ctx, rpc.TaskSignalParams{RunID: run, Key: key, Payload: data, SignalID: sid})
		}
		return err
	})
	if err != nil {
		return err
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, map[string]any{"accepted": res.Accepted, "tasks": res.Tasks, "state": res.State, "signal_id": sid, "index": res.Index})
	}
	switch {
	case res.Accepted:
		fmt.Fprintf(w, "signal delivered: %s of run %s completed\n", strings.Join(res.Tasks, ", "), shortID(run))
	case name != "":
		fmt.Fprintf(w, "no task of run %s is waiting for signal %q (see `flowd run get %s`)\n", shortID(run), name, run)
	default:
		fmt.Fprintf(w, "task %s is not waiting (state %s): nothing changed (see `flowd task get %s/%s`)\n", key, StateLabel(res.State), run, key)
	}
	if !res.Accepted {
		return exitWith(exitError)
	}
	return nil
}

// delayFlags reads submit's --start-at and --delay.
func delayFlags(cCtx *cli.Context) (startAt string, delayMS int64, err error) {
	startAt, d := cCtx.String("start-at"), cCtx.Duration("delay")
	switch {
	case startAt != "" && d != 0:
		return "", 0, usageErr(cCtx, "give --start-at or --delay, not both")
	case d < 0:
		return "", 0, usageErr(cCtx, "--delay %s is negative", d)
	case startAt != "":
		if _, err := time.Parse(time.RFC3339Nano, startAt); err != nil {
			return "", 0, usageErr(cCtx, "--start-at %q is not an RFC 3339 time like 2026-12-01T08:00:00Z", startAt)
		}
	}
	return startAt, d.Milliseconds(), nil
}

// deadlineText is a run's deadline for `run get`.
func deadlineText(r *rpc.Run) string {
	s := fmt.Sprintf("%s after the start", time.Duration(r.DeadlineMS)*time.Millisecond)
	if !r.DeadlineAt.IsZero() {
		s += ": " + stamp(r.DeadlineAt)
	}
	return s
}

// timeNote adds what a task waits for to its RESULT / ERROR cell.
func timeNote(t rpc.Task, out string) string {
	if t.Late { // schedule_to_start_policy alert: ready past schedule_to_start_ms
		out = strings.TrimSpace("(late: unclaimed past schedule_to_start_ms) " + out)
	}
	switch {
	case t.Waiting:
		return strings.TrimSpace("waiting for signal " + t.Signal + " " + out)
	case !t.NotBefore.IsZero():
		return strings.TrimSpace("retry not before " + stamp(t.NotBefore) + "; " + out)
	case !t.DeadlineAt.IsZero() && t.State == "running":
		return strings.TrimSpace("times out " + ago(t.DeadlineAt) + " " + out)
	}
	return out
}
