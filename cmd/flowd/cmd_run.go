package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

func init() { commands = append(commands, runCommand) }

// Definitions of the run verbs, used verbatim in their help.
const (
	usageCancel    = "stop the run now (pending/ready tasks cancelled, running leases revoked; terminal)"
	usageInterrupt = "pause the run (nothing new is dispatched; running tasks may finish and their results are kept)"
	usageResume    = "an interrupted run continues"
	usageRevert    = "undo the run (compensation handlers run in reverse dependency order; ends reverted)"
	usageReplay    = "a new run with a new id from the parent's frozen spec and input, linked by parent_id (--reuse-succeeded starts the parent's succeeded tasks as succeeded)"
)

const idArgs = "ID (a run id, or any unique part of it such as the short id)"

var runCommand = &cli.Command{
	Name:  "run",
	Usage: "list, inspect, wait for and steer runs",
	Description: "A run id may be given as any unique part of it, e.g. the 12-character short\n" +
		"id that tables show.\n\n" +
		"list and get read on the leader (they see every acknowledged write). Without a\n" +
		"quorum, or when no leader answers within half of --timeout, they show the\n" +
		"reachable agent's own state instead, with a \"possibly stale\" warning on stderr.",
	Subcommands: []*cli.Command{
		{
			Name:  "list",
			Usage: "list runs, newest first",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "state", Usage: "only runs in `STATE` (" + runStateList() + ")"},
				&cli.IntFlag{Name: "limit", Aliases: []string{"n"}, Value: 20, Usage: "runs per page"},
				&cli.StringFlag{Name: "cursor", Usage: "continue after this run id (next_cursor of the previous page)"},
				&cli.StringSliceFlag{Name: "label", Aliases: []string{"l"}, Usage: "only runs with this label `KEY=VALUE` (repeat: all must match)"},
				&cli.StringFlag{Name: "selector", Aliases: []string{"s"}, Usage: "only runs matching the label selector `SEL`, e.g. 'env=prod,team!=data' (terms k=v, k!=v, k, !k; all must hold; with --label too)"},
				&cli.StringFlag{Name: "workflow", Usage: "only runs of the workflow `NAME`"},
				&cli.StringFlag{Name: "definition", Usage: "only runs of the stored definition `NAME[@VERSION]` (any version without @)"},
				&cli.StringFlag{Name: "schedule", Usage: "only runs the schedule `ID` started (--label " + domain.ScheduleLabel + "=ID)"},
				&cli.DurationFlag{Name: "since", Usage: "only runs created in the last `DUR` (e.g. 1h)"},
				&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "every page"},
			},
			Action: runListAction,
		},
		{Name: "get", Usage: "show a run and its tasks", ArgsUsage: idArgs, Action: runGetAction},
		{
			Name:      "wait",
			Usage:     "wait until a run is done; exit 0 succeeded, 3 failed/cancelled/reverted, 4 timeout",
			ArgsUsage: idArgs,
			Flags: []cli.Flag{
				waitTimeoutFlag("FLOWD_RUN_WAIT_WAIT_TIMEOUT", "FLOWD_RUN_WAIT_TIMEOUT"),
			},
			Action: runWaitAction,
		},
		{
			Name:      "watch",
			Usage:     "stream a run's transitions until it is done (exit codes as for wait)",
			ArgsUsage: idArgs,
			Action:    runWatchAction,
		},
		verbCommand("cancel", rpc.MethodRunCancel, usageCancel, "cancelled"),
		verbCommand("interrupt", rpc.MethodRunInterrupt, usageInterrupt, "interrupted"),
		verbCommand("resume", rpc.MethodRunResume, usageResume, "resumed"),
		verbCommand("revert", rpc.MethodRunRevert, usageRevert, "reverting"),
		{
			Name:      "replay",
			Usage:     usageReplay,
			ArgsUsage: idArgs,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "input", Usage: "replace the input: `JSON` inline, or @file (@- for stdin)"},
				&cli.BoolFlag{Name: "reuse-succeeded", Usage: "start the parent's succeeded tasks as succeeded"},
				&cli.StringFlag{Name: "id", Usage: "the new run's `UUID` (default: a new UUIDv7)"},
				&cli.BoolFlag{Name: "wait", Aliases: []string{"w"}, Usage: "wait until the new run is done"},
				waitTimeoutFlag("FLOWD_RUN_REPLAY_WAIT_TIMEOUT", "FLOWD_RUN_REPLAY_TIMEOUT"),
			},
			Action: runReplayAction,
		},
		runRetryCommand,
		{Name: "stats", Usage: "per-task attempts, queue wait and run time of a run", ArgsUsage: idArgs, Action: runStatsAction},
	},
}

func runStateList() string {
	var s []string
	for _, st := range domain.RunStates {
		s = append(s, string(st))
	}
	return strings.Join(s, ", ")
}

func runListAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	state := domain.RunState(cCtx.String("state"))
	if state != "" && !slices.Contains(domain.RunStates, state) {
		return usageErr(cCtx, "--state %q: want one of %s", state, runStateList())
	}
	limit := cCtx.Int("limit")
	if limit <= 0 || limit > 1000 {
		return usageErr(cCtx, "--limit %d: want 1..1000", limit)
	}
	all := cCtx.Bool("all")
	if all && !cCtx.IsSet("limit") {
		limit = 500
	}
	labels, err := parseLabelFilter(cCtx, cCtx.StringSlice("label"))
	if err != nil {
		return err
	}
	if id := cCtx.String("schedule"); id != "" {
		if v, ok := labels[domain.ScheduleLabel]; ok && v != id {
			return usageErr(cCtx, "--schedule %s and --label %s=%s name different schedules: give one of them", id, domain.ScheduleLabel, v)
		}
		labels[domain.ScheduleLabel] = id
	}
	sel := cCtx.String("selector")
	if _, err := domain.ParseSelector(sel); err != nil {
		return usageErr(cCtx, "--selector: %v", strings.TrimPrefix(err.Error(), domain.ErrInvalidArgument.Error()+": "))
	}
	filter := rpc.ListParams{Labels: labels, Selector: sel, Workflow: cCtx.String("workflow"), Definition: cCtx.String("definition")}
	if d := cCtx.Duration("since"); d > 0 {
		filter.CreatedAfter = time.Now().Add(-d)
	}
	var out rpc.ListResult
	err = withClient(cCtx, func(ctx context.Context, c *rpc.Client) error {
		cursor := cCtx.String("cursor")
		for {
			var page rpc.ListResult
			err := consistentRead(cCtx, ctx, func(ctx context.Context, consistent bool) error {
				p := filter
				p.State, p.Limit, p.Cursor, p.Consistent = state, limit, cursor, consistent
				return c.CallIdempotent(ctx, rpc.MethodRunList, p, &page)
			})
			if err != nil {
				return err
			}
			out.Runs = append(out.Runs, page.Runs...)
			out.Counts, out.NextCursor = page.Counts, page.NextCursor
			if !all || page.NextCursor == "" {
				return nil
			}
			cursor = page.NextCursor
		}
	})
	if err != nil {
		return err
	}
	if out.Runs == nil {
		out.Runs = []rpc.Run{}
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, out)
	}
	if len(out.Runs) == 0 {
		fmt.Fprintln(w, "no runs")
		return nil
	}
	p := newPainter(cCtx, w)
	tw := newTable(w)
	row(tw, "ID", "WORKFLOW", p.header("STATE"), "TASKS", "CREATED", "DURATION", "PARENT", "LABELS")
	for _, r := range out.Runs {
		parent := "-"
		if r.ParentID != "" {
			parent = shortID(r.ParentID)
		}
		row(tw, shortID(r.ID), dash(r.Workflow), p.state(string(r.State)), fmt.Sprintf("%d/%d", r.Done, r.TaskCount),
			ago(r.CreatedAt), span(r.StartedAt, r.FinishedAt), parent, labelList(r.Labels))
	}
	tw.Flush()
	if out.NextCursor != "" {
		fmt.Fprintf(cCtx.App.ErrWriter, "more runs: --all, or --cursor %s\n", out.NextCursor)
	}
	return nil
}

// idArg returns the one run id argument.
func idArg(cCtx *cli.Context) (string, error) {
	if err := needArgs(cCtx, 1, 1, "ID"); err != nil {
		return "", err
	}
	id := strings.TrimSpace(cCtx.Args().First())
	if id == "" {
		return "", usageErr(cCtx, "the run id is empty")
	}
	return id, nil
}

func runGetAction(cCtx *cli.Context) error {
	id, err := idArg(cCtx)
	if err != nil {
		return err
	}
	var r *rpc.Run
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		r, err = getRunConsistent(cCtx, ctx, c, id)
		return err
	}); err != nil {
		return err
	}
	if jsonOut(cCtx) {
		return printJSON(cCtx.App.Writer, r)
	}
	printRun(cCtx, r)
	return nil
}

// consistentRead runs read(true): on the leader after a barrier, so it
// sees every write acknowledged before it, whichever agent the client
// talks to. Without a leader (no quorum, an election that outlasts half of
// ctx's time) it falls back to read(false), the agent's local state, and
// says so on stderr: the first try gets at most half of the time left, so
// the fallback always has the rest.
func consistentRead(cCtx *cli.Context, ctx context.Context, read func(ctx context.Context, consistent bool) error) error {
	first, cancel := ctx, context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); ok {
		first, cancel = context.WithTimeout(ctx, time.Until(dl)/2)
	}
	err := read(first, true)
	timedOut := first.Err() != nil && ctx.Err() == nil
	cancel()
	if err == nil || !(timedOut || isCode(err, rpc.CodeUnavailable) || errors.Is(err, rpc.ErrNoQuorum)) {
		return err
	}
	why := "the cluster has no leader"
	if re, ok := errors.AsType[*rpc.ReachError](err); ok && errors.Is(err, rpc.ErrNoQuorum) {
		why = fmt.Sprintf("%d of %d agents reachable, no quorum", re.Reachable, re.Voters)
	} else if timedOut {
		why = "no leader answered in time"
	}
	warn := func() {
		fmt.Fprintf(cCtx.App.ErrWriter, "warning: %s; showing one agent's possibly stale state (check `flowd health`)\n", why)
	}
	ferr := read(ctx, false)
	if pe, ok := errors.AsType[*rpc.Error](ferr); ok && pe.Code != rpc.CodeUnavailable {
		warn() // e.g. not found: in the agent's state, which may be behind
		return ferr
	}
	if ferr != nil {
		if errors.Is(ferr, rpc.ErrNoAgent) || errors.Is(ferr, rpc.ErrTLS) || !errors.Is(err, rpc.ErrNoQuorum) {
			return ferr
		}
		return fmt.Errorf("%w; and the local read failed too: %w", err, ferr)
	}
	warn()
	return nil
}

// getRunConsistent is run.get as a consistent read.
func getRunConsistent(cCtx *cli.Context, ctx context.Context, c *rpc.Client, id string) (*rpc.Run, error) {
	var r rpc.Run
	err := consistentRead(cCtx, ctx, func(ctx context.Context, consistent bool) error {
		return c.CallIdempotent(ctx, rpc.MethodRunGet, rpc.IDParams{ID: id, Consistent: consistent}, &r)
	})
	return &r, err
}

// printRun shows a run's summary and task table.
func printRun(cCtx *cli.Context, r *rpc.Run) {
	w := cCtx.App.Writer
	p := newPainter(cCtx, w)
	tw := newTable(w)
	row(tw, "Run:", r.ID+"  (short "+shortID(r.ID)+")")
	row(tw, "Workflow:", dash(r.Workflow))
	if r.Definition != "" {
		row(tw, "Definition:", fmt.Sprintf("%s@%d", r.Definition, r.DefinitionVersion))
	}
	row(tw, "State:", p.state(string(r.State)))
	if r.Reason != "" {
		row(tw, "Reason:", r.Reason)
	}
	row(tw, "Tasks:", fmt.Sprintf("%d/%d done", r.Done, r.TaskCount)+countsText(r.Counts))
	row(tw, "Created:", stamp(r.CreatedAt))
	if r.Scheduled {
		row(tw, "Scheduled:", "starts at "+stamp(r.StartAt))
	}
	row(tw, "Started:", stamp(r.StartedAt))
	row(tw, "Finished:", stamp(r.FinishedAt))
	row(tw, "Duration:", span(r.StartedAt, r.FinishedAt))
	if r.OnFailure != "" {
		row(tw, "On failure:", r.OnFailure)
	}
	if r.DeadlineMS > 0 {
		row(tw, "Deadline:", deadlineText(r))
	}
	if r.ParentID != "" {
		row(tw, "Parent:", r.ParentID+"  (short "+shortID(r.ParentID)+")")
	}
	if len(r.Children) > 0 {
		var cs []string
		for k, id := range r.Children {
			cs = append(cs, k+"="+shortID(id))
		}
		sort.Strings(cs)
		row(tw, "Children:", strings.Join(cs, " ")+"  (child runs by task)")
	}
	if len(r.Labels) > 0 {
		var ls []string
		for k, v := range r.Labels {
			ls = append(ls, k+"="+v)
		}
		sort.Strings(ls)
		row(tw, "Labels:", strings.Join(ls, " "))
	}
	if len(r.PausedQueues) > 0 {
		row(tw, "Paused queues:", strings.Join(r.PausedQueues, ", "))
	}
	if len(r.WaitingForWorker) > 0 {
		row(tw, "Waiting for:", "a worker for type "+strings.Join(r.WaitingForWorker, ", ")+" (none claims it; see `flowd worker list`)")
	} else if r.WaitingForWorkerNote != "" {
		row(tw, "Workers:", r.WaitingForWorkerNote)
	}
	for i, wo := range r.WaitingOn {
		if wo.Reason == "no_worker" {
			continue // Waiting for: above
		}
		label := ""
		if i == 0 || r.WaitingOn[i-1].Reason == "no_worker" {
			label = "Waiting on:"
		}
		row(tw, label, waitingText(wo))
	}
	if k := failedOnce(r); k != "" {
		row(tw, "Retries:", k+" failed its only attempt: max_attempts defaults to 1 (no retry); set retry.max_attempts in the spec, or `flowd settings set --default-max-attempts N` for new runs")
	}
	if len(r.Input) > 0 {
		row(tw, "Input:", oneLine(string(r.Input), 100))
	}
	tw.Flush()
	if len(r.Tasks) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	row(tw, "KEY", "TYPE", "QUEUE", p.header("STATE"), "ATTEMPT", "RETRY", "DEPS", "DURATION", "RESULT / ERROR")
	for _, t := range r.Tasks {
		out := ""
		switch {
		case t.State == domain.TaskSkipped:
			out = oneLine(t.Error, 60) // why: "skipped: when is false: ..."
		case t.Error != "":
			out = "error: " + oneLine(t.Error, 60)
		case len(t.Result) > 0:
			out = oneLine(string(t.Result), 60)
		}
		if t.Reused {
			out = strings.TrimSpace("(reused) " + out)
		}
		if t.ChildRun != "" && out == "" {
			out = "child run " + shortID(t.ChildRun)
		}
		if t.Finally {
			out = strings.TrimSpace("(finally) " + out)
		}
		if t.WaitingOn != nil && out == "" {
			out = "waiting: " + t.WaitingOn.Reason
		}
		out = timeNote(t, out)
		deps := "-"
		if len(t.Deps) > 0 {
			deps = strings.Join(t.Deps, ",")
		}
		row(tw, t.Key, t.Type, t.Queue, p.state(string(t.State)), fmt.Sprintf("%d/%d", t.Attempt, t.MaxAttempts), retryText(t.Retry),
			deps, span(t.StartedAt, t.FinishedAt), dash(out))
	}
	tw.Flush()
}

// failedOnce names the first task that failed with a one-attempt policy
// (the default), or "".
func failedOnce(r *rpc.Run) string {
	for _, t := range r.Tasks {
		if t.State == domain.TaskFailed && t.MaxAttempts == 1 && t.Attempt == 1 {
			return t.Key
		}
	}
	return ""
}

// retryText is a task's retry policy in force: "none" (one attempt, the
// default), or the backoff between attempts, "1s..1m x2".
func retryText(p *domain.RetryPolicy) string {
	switch {
	case p == nil:
		return "-"
	case p.MaxAttempts <= 1:
		return "none"
	}
	s := human(time.Duration(p.InitialBackoffMS)*time.Millisecond) + ".." + human(time.Duration(p.MaxBackoffMS)*time.Millisecond)
	if p.Multiplier > 0 && p.Multiplier != 1 {
		s += " x" + strconv.FormatFloat(p.Multiplier, 'f', -1, 64)
	}
	return s
}

// countsText is " (2 running, 3 succeeded)" in state display order.
func countsText(counts map[string]int) string {
	var parts []string
	for _, s := range domain.TaskStates {
		if n := counts[string(s)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func runWaitAction(cCtx *cli.Context) error {
	id, err := idArg(cCtx)
	if err != nil {
		return err
	}
	c, err := newClient(cCtx)
	if err != nil {
		return err
	}
	defer c.Close()
	return waitAndReport(cCtx, c, id, cCtx.Duration("wait-timeout"), time.Now(), false)
}

// outcomeErr is the exit code of a done run.
func outcomeErr(state domain.RunState) error {
	if state == domain.RunSucceeded {
		return nil
	}
	return exitWith(exitRunUnsuc)
}

func runWatchAction(cCtx *cli.Context) error {
	id, err := idArg(cCtx)
	if err != nil {
		return err
	}
	s, err := newEventStream(cCtx)
	if err != nil {
		return err
	}
	defer s.close()
	ctx, cancel := context.WithCancel(cCtx.Context)
	defer cancel()
	gctx, gcancel := callCtx(cCtx)
	r, err := getRunConsistent(cCtx, gctx, s.c, id)
	gcancel()
	if err != nil {
		return err
	}
	if !jsonOut(cCtx) {
		fmt.Fprintf(cCtx.App.ErrWriter, "watching run %s (%s, %s, tasks %d/%d)\n", shortID(r.ID), dash(r.Workflow),
			StateLabel(string(r.State)), r.Done, r.TaskCount)
	}
	if r.State.Done() {
		if jsonOut(cCtx) {
			return outcomeErr(r.State)
		}
		return runOutcome(cCtx, r, true, 0)
	}
	// Start at the run's first retained event, so the watch shows how it
	// got where it is; without one, after the state just read.
	from := r.ModifyIndex + 1
	lctx, lcancel := callCtx(cCtx)
	if first, err := s.c.EventsList(lctx, rpc.EventsListParams{RunID: r.ID, Limit: 1}); err == nil && len(first.Events) > 0 {
		from = first.Events[0].Index
	}
	lcancel()
	s.start(r.ID, from)
	// run.wait keeps a call going: it notices a lost connection (the client
	// fails over and the stream re-subscribes) and says when the run is done.
	done := make(chan *rpc.Run, 1)
	go func() {
		for ctx.Err() == nil {
			wctx, wcancel := context.WithTimeout(ctx, 30*time.Second+callTimeout(cCtx))
			res, err := s.c.RunWait(wctx, r.ID, 30_000)
			wcancel()
			if err == nil && res.Done {
				done <- &res.Run
				return
			}
			if pe, ok := errors.AsType[*rpc.Error](err); ok && pe.Code != rpc.CodeUnavailable {
				s.fail(err)
				return
			}
		}
	}()
	var final *rpc.Run
	var grace <-chan time.Time
	finish := func(fr *rpc.Run) error {
		if jsonOut(cCtx) {
			return outcomeErr(fr.State)
		}
		return runOutcome(cCtx, fr, true, 0)
	}
	for {
		select {
		case ev := <-s.events:
			printEvent(cCtx, ev, false)
			if ev.Kind == "run" && ev.RunID == r.ID && domain.RunState(ev.To).Done() {
				if final == nil {
					gctx, gcancel := callCtx(cCtx)
					fr, err := s.c.RunGet(gctx, r.ID)
					gcancel()
					if err != nil {
						return err
					}
					final = fr
				}
				return finish(final)
			}
			if final != nil && ev.Index >= final.ModifyIndex {
				return finish(final)
			}
		case fr := <-done:
			// Let the stream deliver the transitions up to the end first.
			final = fr
			if last, ok := s.last(); ok && last >= fr.ModifyIndex {
				return finish(final)
			}
			grace = time.After(2 * time.Second)
		case <-grace:
			return finish(final)
		case err := <-s.errs:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// verbCommand builds cancel, interrupt, resume and revert.
func verbCommand(name, method, usage, done string) *cli.Command {
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		ArgsUsage: idArgs,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "reason", Usage: "why (recorded on the run)"},
		}, verbWaitFlags(name)...),
		Action: func(cCtx *cli.Context) error {
			id, err := idArg(cCtx)
			if err != nil {
				return err
			}
			var res *rpc.ChangedResult
			var r rpc.Run
			err = withClient(cCtx, func(ctx context.Context, c *rpc.Client) error {
				if res, err = c.RunVerb(ctx, method, id, cCtx.String("reason")); err != nil {
					return err
				}
				// A consistent read (on the leader, after a barrier) shows the
				// state the verb left.
				return c.CallIdempotent(ctx, rpc.MethodRunGet, rpc.IDParams{ID: id, Consistent: true}, &r)
			})
			if err != nil {
				return verbErr(name, id, err)
			}
			w := cCtx.App.Writer
			if jsonOut(cCtx) && !cCtx.Bool("wait") {
				return printJSON(w, map[string]any{"id": r.ID, "changed": res.Changed, "state": r.State, "index": res.Index})
			}
			switch {
			case jsonOut(cCtx): // --wait: the run as it ends
			case res.Changed:
				fmt.Fprintf(w, "run %s %s: now %s\n", shortID(r.ID), done, StateLabel(string(r.State)))
			default:
				fmt.Fprintf(w, "run %s unchanged: it is already %s\n", shortID(r.ID), StateLabel(string(r.State)))
			}
			return verbAfter(cCtx, name, res.Changed, &r)
		},
	}
}

func runReplayAction(cCtx *cli.Context) error {
	id, err := idArg(cCtx)
	if err != nil {
		return err
	}
	p := rpc.ReplayParams{ID: id, NewID: cCtx.String("id"), ReuseSucceeded: cCtx.Bool("reuse-succeeded")}
	if p.NewID == "" {
		p.NewID = newRunID() // a retried replay is idempotent
	} else if _, err := uuid.Parse(p.NewID); err != nil {
		return usageErr(cCtx, "--id %q is not a UUID", p.NewID)
	}
	if p.Input, err = jsonArg(cCtx, "--input", cCtx.String("input")); err != nil {
		return err
	}
	c, err := newClient(cCtx)
	if err != nil {
		return err
	}
	defer c.Close()
	start := time.Now()
	ctx, cancel := waitCallCtx(cCtx)
	res, err := c.RunReplay(ctx, p)
	cancel()
	if err != nil {
		return err
	}
	wait := cCtx.Bool("wait")
	if jsonOut(cCtx) && !wait {
		v := submitView(res)
		return printJSON(cCtx.App.Writer, map[string]any{"id": v.ID, "short_id": v.ShortID, "state": v.State,
			"created": v.Created, "parent_id": p.ID})
	}
	if !jsonOut(cCtx) {
		fmt.Fprintf(cCtx.App.Writer, "run %s replays %s: %s, state %s\n", shortID(res.ID), shortID(id), res.ID, StateLabel(string(res.State)))
	}
	if !wait {
		return nil
	}
	return waitAndReport(cCtx, c, res.ID, cCtx.Duration("wait-timeout"), start, true)
}

func runStatsAction(cCtx *cli.Context) error {
	id, err := idArg(cCtx)
	if err != nil {
		return err
	}
	var st *rpc.RunStats
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		st, err = c.RunStats(ctx, id)
		return err
	}); err != nil {
		return err
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, st)
	}
	p := newPainter(cCtx, w)
	tw := newTable(w)
	row(tw, "Run:", st.ID+"  (short "+shortID(st.ID)+")")
	row(tw, "State:", p.state(st.State))
	row(tw, "Tasks:", strings.TrimPrefix(strings.TrimSuffix(countsText(st.Counts), ")"), " ("))
	row(tw, "Attempts:", fmt.Sprintf("%d (%d retries)", st.Attempts, st.Retries))
	row(tw, "Run time:", human(time.Duration(st.RunMS)*time.Millisecond))
	tw.Flush()
	if len(st.Tasks) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	row(tw, "KEY", p.header("STATE"), "ATTEMPTS", "QUEUE WAIT", "RUN TIME")
	for _, t := range st.Tasks {
		row(tw, t.Key, p.state(t.State), t.Attempts, human(time.Duration(t.QueueWaitMS)*time.Millisecond),
			human(time.Duration(t.RunMS)*time.Millisecond))
	}
	return tw.Flush()
}

// labelList shows labels as k=v,k=v in key order ("-" for none).
func labelList(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}
