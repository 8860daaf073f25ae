package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

func init() { commands = append(commands, eventsCommand) }

var eventsCommand = &cli.Command{
	Name:  "events",
	Usage: "list the cluster's recent transitions, or follow them live",
	Description: "Events are replicated: every agent keeps the same window of recent ones, each\n" +
		"identified by its raft index (and a sequence number within it). --follow streams\n" +
		"new events (from --from if given) and resumes on another agent after a reconnect\n" +
		"without losing or repeating any. --since starts at the first event at or after a\n" +
		"time (a duration back from now, 10m, or an RFC 3339 time), --from-start at the\n" +
		"oldest event kept. With --output json, one JSON object per line.",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "run", Usage: "only the events of this run `ID`"},
		&cli.Uint64Flag{Name: "from", Usage: "start at raft `INDEX` (default: the newest --limit events; with --follow: now)"},
		&cli.StringFlag{Name: "since", Usage: "start at the first event at or after `WHEN`: a duration back from now (10m, 2h) or an RFC 3339 time"},
		&cli.BoolFlag{Name: "from-start", Usage: "start at the oldest event the cluster keeps (the first --limit events)"},
		&cli.IntFlag{Name: "limit", Aliases: []string{"n"}, Value: 100, Usage: "at most N events (list only)"},
		&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "stream events as they happen until interrupted"},
	},
	Action: eventsAction,
}

func eventsAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	runID := cCtx.String("run")
	starts := 0
	for _, f := range []string{"from", "since", "from-start"} {
		if cCtx.IsSet(f) {
			starts++
		}
	}
	if starts > 1 {
		return usageErr(cCtx, "give one of --from, --since and --from-start")
	}
	var since time.Time
	if v := cCtx.String("since"); v != "" {
		var err error
		if since, err = parseSince(v, time.Now()); err != nil {
			return usageErr(cCtx, "--since %q: %v", v, err)
		}
	}
	from := cCtx.Uint64("from")
	if cCtx.Bool("from-start") {
		from = 1 // the oldest kept (the window starts at or after it)
	}
	if cCtx.Bool("follow") {
		if !since.IsZero() {
			if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
				from, err = eventIndexSince(ctx, c, since)
				return err
			}); err != nil {
				return err
			}
		}
		return followEvents(cCtx, runID, from)
	}
	limit := cCtx.Int("limit")
	if limit <= 0 || limit > 10_000 {
		return usageErr(cCtx, "--limit %d: want 1..10000", limit)
	}
	var res *rpc.EventsListResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		if !since.IsZero() {
			if from, err = eventIndexSince(ctx, c, since); err != nil {
				return err
			}
		}
		// Without a start, the newest events (like tail); with one, from there on.
		res, err = c.EventsList(ctx, rpc.EventsListParams{FromIndex: from, RunID: runID, Limit: limit, Latest: from == 0})
		return err
	}); err != nil {
		return err
	}
	switch {
	case jsonOut(cCtx): // one object per line, as --follow prints them
		for _, e := range res.Events {
			printEvent(cCtx, e, false)
		}
	case len(res.Events) == 0:
		fmt.Fprintln(cCtx.App.Writer, "no events")
		return nil
	default:
		for _, e := range res.Events {
			fmt.Fprintln(cCtx.App.Writer, eventLine(e, runID == ""))
		}
	}
	if len(res.Events) == limit && starts > 0 {
		fmt.Fprintf(cCtx.App.ErrWriter, "more events may follow: --from %d\n", res.Events[len(res.Events)-1].Index+1)
	}
	return nil
}

// parseSince reads --since: a duration back from now or an RFC 3339 time.
func parseSince(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("a duration back from now must not be negative")
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("want a duration (10m, 2h) or an RFC 3339 time (2026-12-01T18:00:00Z)")
	}
	return t, nil
}

// eventIndexSince finds the raft index of the first kept event at or after
// t. Event times never go back as the index grows (they are the leader's
// stamps, made monotone by the state machine), so it bisects the window
// one event at a time: about log2(window) small calls. An index past the
// newest event (nothing since t) is returned as newest + 1.
func eventIndexSince(ctx context.Context, c *rpc.Client, t time.Time) (uint64, error) {
	at := func(from uint64) (*rpc.Event, error) {
		r, err := c.EventsList(ctx, rpc.EventsListParams{FromIndex: from, Limit: 1})
		if err != nil || len(r.Events) == 0 {
			return nil, err
		}
		return &r.Events[0], nil
	}
	newest, err := c.EventsList(ctx, rpc.EventsListParams{Limit: 1, Latest: true})
	if err != nil {
		return 0, err
	}
	if len(newest.Events) == 0 {
		return 1, nil
	}
	last := newest.Events[0]
	if last.At.Before(t) {
		return last.Index + 1, nil
	}
	oldest, err := at(1)
	if err != nil || oldest == nil {
		return 1, err
	}
	// P(x): the first event at or after index x is at or after t; false
	// at the oldest event, true at the newest, monotone in x. Its smallest
	// x is one past the last event before t: listing from x starts at the
	// first event at or after t.
	lo, hi := oldest.Index, last.Index
	if !oldest.At.Before(t) {
		return lo, nil
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		e, err := at(mid)
		if err != nil {
			return 0, err
		}
		if e != nil && e.At.Before(t) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

// followEvents streams until the context ends (Ctrl-C) or the stream fails.
func followEvents(cCtx *cli.Context, runID string, from uint64) error {
	s, err := newEventStream(cCtx)
	if err != nil {
		return err
	}
	defer s.close()
	ctx, cancel := context.WithCancel(cCtx.Context)
	defer cancel()
	s.start(runID, from)
	go s.keepalive(ctx, 2*time.Second)
	for {
		select {
		case ev := <-s.events:
			printEvent(cCtx, ev, runID == "")
		case err := <-s.errs:
			return err
		case <-ctx.Done():
			return nil
		}
	}
}
