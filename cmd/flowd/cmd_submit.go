package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

func init() { commands = append(commands, submitCommand) }

var submitCommand = &cli.Command{
	Name:      "submit",
	Usage:     "submit a workflow (YAML or JSON file) as a new run",
	ArgsUsage: "FILE (- for stdin), or --definition NAME[@VERSION]",
	Description: "The agent validates the workflow and reports every problem with its path.\n" +
		"With --definition it runs a stored definition instead (flowd def put): its latest\n" +
		"version, or NAME@VERSION.\n" +
		"A run id is always sent (a new UUIDv7 unless --id is given), so retrying the\n" +
		"same submission never creates a second run.\n\n" +
		"With --wait, shows \"tasks done/total\" and exits 0 if the run succeeded,\n" +
		"3 if it failed, was cancelled or reverted, 4 if --wait-timeout passed first.\n" +
		"--wait-timeout bounds the whole command, the submission included (plus 0.5s).",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "id", Usage: "the run's `UUID` (default: a new UUIDv7)"},
		&cli.StringFlag{Name: "input", Usage: "the run's input: `JSON` inline, or @file (@- for stdin)"},
		&cli.StringSliceFlag{Name: "label", Aliases: []string{"l"}, Usage: "a label `k=v` (repeatable)"},
		&cli.StringFlag{Name: "if-full", Value: "queue", Usage: "when the concurrent-run cap is reached: queue or reject"},
		&cli.BoolFlag{Name: "wait", Aliases: []string{"w"}, Usage: "wait until the run is done"},
		waitTimeoutFlag("FLOWD_SUBMIT_WAIT_TIMEOUT", "FLOWD_SUBMIT_TIMEOUT"),
		&cli.StringFlag{Name: "start-at", Usage: "start the run at `TIME` (RFC 3339, e.g. 2026-12-01T08:00:00Z); pending until then"},
		&cli.DurationFlag{Name: "delay", Usage: "start the run `DUR` from now (e.g. 1h); pending until then"},
		&cli.StringFlag{Name: "definition", Aliases: []string{"d"}, Usage: "run the stored definition `NAME[@VERSION]` (default: its latest version) instead of a FILE"},
	},
	Action: submitAction,
}

// parseLabels turns k=v flags into a map.
func parseLabels(cCtx *cli.Context, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	// urfave/cli splits slice flags on commas: glue a piece without '='
	// back to the label before it ("k=a,b" is one label).
	var joined []string
	for _, kv := range kvs {
		if n := len(joined); n > 0 && !strings.Contains(kv, "=") {
			joined[n-1] += "," + kv
			continue
		}
		joined = append(joined, kv)
	}
	out := map[string]string{}
	for _, kv := range joined {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usageErr(cCtx, "--label %q: want key=value", kv)
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

func newRunID() string { return uuid.Must(uuid.NewV7()).String() }

func submitAction(cCtx *cli.Context) error {
	p := rpc.SubmitParams{ID: cCtx.String("id"), IfFull: cCtx.String("if-full"), Definition: cCtx.String("definition")}
	if p.Definition != "" {
		if err := needArgs(cCtx, 0, 0, "no FILE with --definition"); err != nil {
			return err
		}
	} else if err := needArgs(cCtx, 1, 1, "FILE (or --definition NAME)"); err != nil {
		return err
	}
	if p.IfFull != "queue" && p.IfFull != "reject" {
		return usageErr(cCtx, "--if-full %q: want queue or reject", p.IfFull)
	}
	if p.ID == "" {
		p.ID = newRunID()
	} else if _, err := uuid.Parse(p.ID); err != nil {
		return usageErr(cCtx, "--id %q is not a UUID", p.ID)
	}
	var err error
	if p.StartAt, p.DelayMS, err = delayFlags(cCtx); err != nil {
		return err
	}
	if p.Input, err = jsonArg(cCtx, "--input", cCtx.String("input")); err != nil {
		return err
	}
	if p.Labels, err = parseLabels(cCtx, cCtx.StringSlice("label")); err != nil {
		return err
	}
	if p.Definition == "" {
		if p.Workflow, err = specJSON(cCtx, cCtx.Args().First()); err != nil {
			return err
		}
	}
	c, err := newClient(cCtx)
	if err != nil {
		return err
	}
	defer c.Close()
	start := time.Now()
	ctx, cancel := waitCallCtx(cCtx)
	res, err := c.RunSubmit(ctx, p)
	cancel()
	if err != nil {
		return err
	}
	wait := cCtx.Bool("wait")
	w := cCtx.App.Writer
	view := submitView(res)
	if p.StartAt != "" || p.DelayMS > 0 {
		// The start time is the leader's (its clock plus --delay): read it
		// back rather than guess it here.
		ctx, cancel := callCtx(cCtx)
		if r, err := getRunConsistent(cCtx, ctx, c, res.ID); err == nil && !r.StartAt.IsZero() {
			at := r.StartAt.UTC()
			view.StartAt = &at
		}
		cancel()
	}
	if !wait || !jsonOut(cCtx) {
		if jsonOut(cCtx) {
			return printJSON(w, view)
		}
		note := ""
		if !res.Created {
			note = " (already submitted with this id: nothing new was created)"
		}
		if view.StartAt != nil {
			note += ", starts " + stamp(*view.StartAt)
		}
		fmt.Fprintf(w, "run %s submitted: %s, state %s%s\n", shortID(res.ID), res.ID, StateLabel(string(res.State)), note)
	}
	if !wait {
		return nil
	}
	return waitAndReport(cCtx, c, res.ID, cCtx.Duration("wait-timeout"), start, true)
}

// waitCallCtx bounds the call that starts a run (submit, replay): by
// --timeout, and with --wait by --wait-timeout too, which bounds the whole
// command.
func waitCallCtx(cCtx *cli.Context) (context.Context, context.CancelFunc) {
	d := callTimeout(cCtx)
	if w := cCtx.Duration("wait-timeout"); cCtx.Bool("wait") && w > 0 {
		d = min(d, w)
	}
	return context.WithTimeout(cCtx.Context, d)
}

// submitView is the --output json form of a submission.
type submitResultView struct {
	ID      string `json:"id"`
	ShortID string `json:"short_id"`
	State   string `json:"state"`
	Created bool   `json:"created"`
	Index   uint64 `json:"index,omitempty"`
	// StartAt: a delayed run's start (--delay, --start-at), as the
	// cluster set it.
	StartAt *time.Time `json:"start_at,omitempty"`
}

func submitView(r *rpc.SubmitResult) submitResultView {
	return submitResultView{ID: r.ID, ShortID: shortID(r.ID), State: string(r.State), Created: r.Created, Index: r.Index}
}

// waitAndReport waits for a run and reports its outcome as the exit code.
// timeout counts from since (the command's start).
func waitAndReport(cCtx *cli.Context, c *rpc.Client, id string, timeout time.Duration, since time.Time, fresh bool) error {
	r, done, err := waitRun(cCtx, c, id, timeout, since, fresh)
	if err != nil {
		return err
	}
	return runOutcome(cCtx, r, done, timeout)
}

// waitTimeoutFlag is how long submit --wait, run wait and run replay --wait
// wait for the run. Its documented name is --wait-timeout; --timeout stays
// an alias (and the old environment variable keeps working) because scripts
// use it, but on these commands it is not the global per-call --timeout.
func waitTimeoutFlag(env ...string) cli.Flag {
	return &cli.DurationFlag{Name: "wait-timeout", Aliases: []string{"timeout"}, EnvVars: env, DefaultText: "no limit",
		Usage: "give up waiting for the run after `DUR` (exit 4); --timeout here is an alias of this, not the per-call deadline"}
}
