package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/rpc/schedrpc"
)

func init() { commands = append(commands, scheduleCommand) }

var scheduleCommand = &cli.Command{
	Name:  "schedule",
	Usage: "run a workflow on a cron expression or an interval",
	Subcommands: []*cli.Command{
		{
			Name:      "create",
			Usage:     "create a schedule that starts the workflow in FILE at each fire time",
			ArgsUsage: "ID FILE",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "cron", Usage: "a cron `EXPR`: 5 fields (min hour dom month dow) or @hourly, @daily, @every 10s ..."},
				&cli.StringFlag{Name: "tz", Usage: "the cron expression's time `ZONE` (IANA name, default UTC)"},
				&cli.DurationFlag{Name: "every", Usage: "fire every `DUR` instead of a cron expression (at least 1s)"},
				&cli.StringFlag{Name: "input", Usage: "every run's input: `JSON` inline, or @file (@- for stdin)"},
				&cli.StringSliceFlag{Name: "label", Aliases: []string{"l"}, Usage: "a label `k=v` for every run (repeatable)"},
				&cli.StringFlag{Name: "overlap", Value: "skip", Usage: "while earlier runs are not done: skip, buffer_one, allow or cancel_other"},
				&cli.DurationFlag{Name: "catchup-window", Usage: "after downtime, fires at most `DUR` late still run; older ones are skipped and counted", DefaultText: "1m"},
				&cli.BoolFlag{Name: "paused", Usage: "create it paused (flowd schedule resume starts it)"},
				&cli.StringFlag{Name: "note", Usage: "a `TEXT` shown with the schedule"},
			},
			Action: scheduleCreateAction,
		},
		{Name: "list", Usage: "schedules with their next and last fire, state and runs started", Action: scheduleListAction},
		{
			Name:      "get",
			Usage:     "a schedule with its next fire times and recent runs",
			ArgsUsage: "ID",
			Flags: []cli.Flag{
				&cli.IntFlag{Name: "next", Value: 5, Usage: "list the next `N` fire times"},
			},
			Action: scheduleGetAction,
		},
		schedulePauseCommand("pause", true),
		schedulePauseCommand("resume", false),
		{
			Name:      "trigger",
			Usage:     "fire a schedule now (its overlap policy applies)",
			ArgsUsage: "ID",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "run-id", Usage: "the run's `UUID` (default: a new UUIDv7; a retry with the same id starts one run)"},
			},
			Action: scheduleTriggerAction,
		},
		{
			Name:      "delete",
			Usage:     "delete a schedule (the runs it started stay)",
			ArgsUsage: "ID",
			Action:    scheduleDeleteAction,
		},
	},
}

func scheduleCreateAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 2, 2, "ID FILE"); err != nil {
		return err
	}
	p := schedrpc.CreateParams{ID: cCtx.Args().Get(0), Cron: cCtx.String("cron"), TimeZone: cCtx.String("tz"),
		IntervalMS: cCtx.Duration("every").Milliseconds(), Overlap: cCtx.String("overlap"),
		CatchupWindowMS: cCtx.Duration("catchup-window").Milliseconds(), Paused: cCtx.Bool("paused"), Note: cCtx.String("note")}
	if (p.Cron == "") == (p.IntervalMS == 0) {
		return usageErr(cCtx, "give one of --cron EXPR (e.g. '0 3 * * *', @hourly) and --every DUR (e.g. 30s)")
	}
	if !domain.ValidOverlap(domain.Overlap(p.Overlap)) {
		return usageErr(cCtx, "--overlap %q: want skip, buffer_one, allow or cancel_other", p.Overlap)
	}
	var err error
	if p.Input, err = jsonArg(cCtx, "--input", cCtx.String("input")); err != nil {
		return err
	}
	if p.Labels, err = parseLabels(cCtx, cCtx.StringSlice("label")); err != nil {
		return err
	}
	if p.Workflow, err = specJSON(cCtx, cCtx.Args().Get(1)); err != nil {
		return err
	}
	var res *schedrpc.CreateResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		res, err = schedrpc.Create(ctx, c, p)
		return err
	}); err != nil {
		return err
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, res)
	}
	if !res.Created {
		fmt.Fprintf(w, "unchanged: schedule %s exists (%s); see it with `flowd schedule get %s`, or delete it first\n", res.ID, res.State, res.ID)
		return nil
	}
	next := stamp(res.NextFireAt)
	if res.State == string(domain.SchedulePaused) {
		next = "when resumed"
	}
	fmt.Fprintf(w, "schedule %s created (%s), first fire %s\n", res.ID, res.State, next)
	return nil
}

// timing is a schedule's cron expression (with its zone) or interval.
func timing(s schedrpc.Schedule) string {
	if s.Cron == "" {
		return "every " + (time.Duration(s.IntervalMS) * time.Millisecond).String()
	}
	if s.TimeZone != "" && s.TimeZone != "UTC" {
		return s.Cron + " (" + s.TimeZone + ")"
	}
	return s.Cron
}

func scheduleState(s schedrpc.Schedule) string {
	if s.State == string(domain.SchedulePaused) {
		return "‖ paused"
	}
	return "▶ active"
}

func scheduleListAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	res, err := fetch(cCtx, func(ctx context.Context, c *rpc.Client) (*schedrpc.ListResult, error) { return schedrpc.List(ctx, c) })
	if err != nil {
		return err
	}
	return printList(cCtx, res, len(res.Schedules), "no schedules yet; create one with `flowd schedule create ID FILE --cron EXPR`", func(tw *tabwriter.Writer) {
		row(tw, "SCHEDULE", "STATE", "TIMING", "WORKFLOW", "NEXT FIRE", "LAST FIRE", "RUNS", "SKIPPED", "MISSED", "OVERLAP")
		for _, s := range res.Schedules {
			row(tw, s.ID, scheduleState(s), timing(s), s.Workflow, stamp(s.NextFireAt), stamp(s.LastFireAt),
				s.Started, s.Skipped, s.Missed, s.Overlap)
		}
	})
}

func scheduleGetAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 1, "ID"); err != nil {
		return err
	}
	id := cCtx.Args().First()
	var s *schedrpc.Schedule
	var runs *rpc.ListResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		if s, err = schedrpc.Get(ctx, c, id, cCtx.Int("next")); err != nil {
			return err
		}
		runs, err = c.RunList(ctx, rpc.ListParams{Labels: map[string]string{domain.ScheduleLabel: id}, Limit: 10})
		return err
	}); err != nil {
		return err
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, struct {
			*schedrpc.Schedule
			Runs []rpc.Run `json:"runs"`
		}{s, runs.Runs})
	}
	tw := newTable(w)
	row(tw, "schedule", s.ID)
	row(tw, "state", scheduleState(*s))
	row(tw, "timing", timing(*s))
	row(tw, "workflow", s.Workflow)
	row(tw, "overlap", s.Overlap)
	row(tw, "catch-up window", human(time.Duration(s.CatchupWindowMS)*time.Millisecond))
	if len(s.Labels) > 0 {
		row(tw, "labels", labelList(s.Labels))
	}
	if s.Note != "" {
		row(tw, "note", s.Note)
	}
	row(tw, "created", stamp(s.CreatedAt))
	row(tw, "last fire", stamp(s.LastFireAt))
	row(tw, "fires", fmt.Sprintf("%d (runs started %d, skipped %d, missed %d)", s.Fires, s.Started, s.Skipped, s.Missed))
	if !s.BufferedAt.IsZero() {
		row(tw, "buffered", stamp(s.BufferedAt)+": starts when the running ones are done")
	}
	if len(s.ActiveRuns) > 0 {
		var ids []string
		for _, r := range s.ActiveRuns {
			ids = append(ids, shortID(r))
		}
		row(tw, "running", strings.Join(ids, " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nNEXT FIRES")
	if len(s.NextFires) == 0 {
		fmt.Fprintln(w, "  none (paused: `flowd schedule resume "+s.ID+"`)")
	}
	for _, t := range s.NextFires {
		fmt.Fprintln(w, "  "+fireTime(t, s.TimeZone)+" (in "+human(time.Until(t).Round(time.Second))+")")
	}
	fmt.Fprintln(w, "\nRECENT RUNS (all: flowd run list --label "+domain.ScheduleLabel+"="+s.ID+")")
	tw = newTable(w)
	row(tw, "  RUN", "STATE", "CREATED")
	for _, r := range runs.Runs {
		row(tw, "  "+shortID(r.ID), r.State, stamp(r.CreatedAt))
	}
	return tw.Flush()
}

func schedulePauseCommand(name string, pause bool) *cli.Command {
	usage := "pause a schedule: it fires no more until resumed"
	if !pause {
		usage = "resume a paused schedule (fires missed while paused are not caught up)"
	}
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		ArgsUsage: "ID",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "note", Usage: "why (`TEXT`), shown with the schedule"},
		},
		Action: func(cCtx *cli.Context) error {
			if err := needArgs(cCtx, 1, 1, "ID"); err != nil {
				return err
			}
			id := cCtx.Args().First()
			var res *rpc.ChangedResult
			if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
				res, err = schedrpc.Pause(ctx, c, id, cCtx.String("note"), pause)
				return err
			}); err != nil {
				return err
			}
			return printChanged(cCtx, res, fmt.Sprintf("schedule %s %sd", id, name))
		},
	}
}

func scheduleTriggerAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 1, "ID"); err != nil {
		return err
	}
	p := schedrpc.TriggerParams{ID: cCtx.Args().First(), RunID: cCtx.String("run-id")}
	if p.RunID == "" {
		p.RunID = newRunID()
	} else if _, err := uuid.Parse(p.RunID); err != nil {
		return usageErr(cCtx, "--run-id %q is not a UUID", p.RunID)
	}
	var res *schedrpc.FireResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		res, err = schedrpc.Trigger(ctx, c, p)
		return err
	}); err != nil {
		return err
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, res)
	}
	switch {
	case !res.Changed:
		fmt.Fprintf(w, "unchanged: run %s was triggered already\n", res.RunID)
	case res.Outcome == string(domain.OutcomeStarted):
		fmt.Fprintf(w, "schedule %s fired: run %s started; follow it with `flowd run get %s`\n", p.ID, res.RunID, shortID(res.RunID))
	case res.Outcome == string(domain.OutcomeBuffered):
		fmt.Fprintf(w, "schedule %s fired: run %s starts when its running runs are done (overlap buffer_one)\n", p.ID, res.RunID)
	default:
		fmt.Fprintf(w, "schedule %s fired but started nothing: its earlier runs are not done (overlap skip)\n", p.ID)
	}
	return nil
}

func scheduleDeleteAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 1, "ID"); err != nil {
		return err
	}
	id := cCtx.Args().First()
	var res *rpc.ChangedResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		res, err = schedrpc.Delete(ctx, c, id)
		return err
	}); err != nil {
		return err
	}
	if !res.Changed {
		// Like queue delete: a name that is not there is an error (a typo
		// should not read as success).
		return failf("list them with `flowd schedule list`", "not found: no schedule %q", id)
	}
	return printChanged(cCtx, res, "schedule "+id+" deleted")
}
