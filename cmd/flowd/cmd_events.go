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
		"without losing or repeating any. With --output json, one JSON object per line.",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "run", Usage: "only the events of this run `ID`"},
		&cli.Uint64Flag{Name: "from", Usage: "start at raft `INDEX` (default: the newest --limit events; with --follow: now)"},
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
	if cCtx.Bool("follow") {
		return followEvents(cCtx, runID, cCtx.Uint64("from"))
	}
	limit := cCtx.Int("limit")
	if limit <= 0 || limit > 10_000 {
		return usageErr(cCtx, "--limit %d: want 1..10000", limit)
	}
	var res *rpc.EventsListResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		// Without --from, the newest events (like tail); with it, from there on.
		from := cCtx.Uint64("from")
		res, err = c.Events(ctx, rpc.EventsListParams{FromIndex: from, RunID: runID, Limit: limit, Latest: from == 0})
		return err
	}); err != nil {
		return err
	}
	if res.Events == nil {
		res.Events = []rpc.Event{}
	}
	if jsonOut(cCtx) {
		return printJSON(cCtx.App.Writer, res)
	}
	if len(res.Events) == 0 {
		fmt.Fprintln(cCtx.App.Writer, "no events")
		return nil
	}
	for _, e := range res.Events {
		fmt.Fprintln(cCtx.App.Writer, eventLine(e, runID == ""))
	}
	if len(res.Events) == limit && cCtx.IsSet("from") {
		fmt.Fprintf(cCtx.App.ErrWriter, "more events may follow: --from %d\n", res.Events[len(res.Events)-1].Index+1)
	}
	return nil
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
