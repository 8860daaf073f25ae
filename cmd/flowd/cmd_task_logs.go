package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

func init() {
	taskCommand.Subcommands = append(taskCommand.Subcommands, &cli.Command{
		Name:      "logs",
		Usage:     "show what a task printed or logged, per attempt",
		ArgsUsage: "RUN KEY (or RUN/KEY; RUN is a run id or any unique part of it)",
		Description: `Prints the stored log of every attempt (or of --attempt N), each line as
  TIME STREAM LINE
under a header per attempt. --follow keeps printing new lines until the task
is finished. An attempt keeps at most 64 KiB of log; a marker line says how
many lines were dropped past that.`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "attempt", Aliases: []string{"a"}, Usage: "only attempt `N` (as `flowd task get` numbers them)"},
			&cli.BoolFlag{Name: "revert", Usage: "with --attempt: the compensation (revert handler) attempt N"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new lines until the task is finished"},
		},
		Action: taskLogsAction,
	})
}

// logPoll is how long one follow call waits for new lines.
const logPoll = 20 * time.Second

func taskLogsAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 2, "RUN KEY"); err != nil {
		return err
	}
	run, key := strings.TrimSpace(cCtx.Args().Get(0)), strings.TrimSpace(cCtx.Args().Get(1))
	if key == "" {
		var ok bool
		if run, key, ok = strings.Cut(run, "/"); !ok {
			return usageErr(cCtx, "want RUN KEY or RUN/KEY, e.g. flowd task logs 3f9a1c2b7d4e extract")
		}
	}
	if run == "" || key == "" {
		return usageErr(cCtx, "want RUN KEY or RUN/KEY, e.g. flowd task logs 3f9a1c2b7d4e extract")
	}
	if cCtx.Int("attempt") < 0 {
		return usageErr(cCtx, "--attempt must be >= 1 (leave it out for every attempt)")
	}
	if cCtx.Bool("revert") && cCtx.Int("attempt") == 0 {
		return usageErr(cCtx, "--revert needs --attempt N (the compensation attempt to show)")
	}
	c, err := newClient(cCtx)
	if err != nil {
		return err
	}
	defer c.Close()
	p := rpc.TaskLogsParams{Run: run, Key: key, Attempt: cCtx.Int("attempt"), Compensation: cCtx.Bool("revert")}
	follow := cCtx.Bool("follow")
	w := cCtx.App.Writer
	pr := logPrinter{w: w, json: jsonOut(cCtx)}
	for {
		if follow {
			p.WaitMS = logPoll.Milliseconds()
		}
		ctx, cancel := context.WithTimeout(cCtx.Context, callTimeout(cCtx)+logPoll*time.Duration(btoi(follow)))
		res, err := c.TaskLogs(ctx, p)
		cancel()
		if err != nil {
			if follow && cCtx.Context.Err() != nil {
				return nil
			}
			if follow && errors.Is(err, context.DeadlineExceeded) {
				continue
			}
			return err
		}
		if err := pr.print(res); err != nil {
			return err
		}
		p.Cursor = res.Cursor
		if res.More {
			continue
		}
		if !follow || res.Done {
			if !pr.any && !pr.json {
				fmt.Fprintf(cCtx.App.ErrWriter, "task %s is %s and has logged nothing%s\n", res.TaskID, res.State, followHint(follow, res))
			}
			return nil
		}
	}
}

func followHint(follow bool, res *rpc.TaskLogsResult) string {
	if follow || res.Done {
		return ""
	}
	return " yet (--follow waits for lines)"
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// logPrinter prints task.logs answers: a header when the attempt changes,
// then its lines (or, with --output json, one JSON object per line).
type logPrinter struct {
	w    io.Writer
	json bool
	last string // the attempt whose header was printed
	any  bool
}

func (p *logPrinter) print(res *rpc.TaskLogsResult) error {
	for _, a := range res.Attempts {
		if len(a.Lines) == 0 {
			continue
		}
		id := fmt.Sprintf("%d/%v", a.Attempt, a.Compensation)
		for _, l := range a.Lines {
			if p.json {
				if err := printJSONLine(p.w, map[string]any{"task_id": res.TaskID, "attempt": a.Attempt,
					"compensation": a.Compensation, "at": l.At, "stream": l.Stream, "line": l.Line}); err != nil {
					return err
				}
				continue
			}
			if id != p.last {
				if p.any {
					fmt.Fprintln(p.w)
				}
				what := "attempt"
				if a.Compensation {
					what = "revert attempt"
				}
				fmt.Fprintf(p.w, "== %s %d · worker %s · %s ==\n", what, a.Attempt, dash(a.Worker), a.Outcome)
				p.last = id
			}
			fmt.Fprintf(p.w, "%s %-6s %s\n", time.UnixMilli(l.At).UTC().Format("15:04:05.000"), l.Stream, l.Line)
		}
		p.any = true
	}
	return nil
}

// printJSONLine writes v as one compact line.
func printJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
