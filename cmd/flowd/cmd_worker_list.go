package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

func init() {
	workerCommand.Usage = "run a worker, or list the live ones"
	workerCommand.Subcommands = append(workerCommand.Subcommands, &cli.Command{
		Name:      "list",
		Usage:     "list the workers the leader has seen recently: types, queues, slots, last contact",
		ArgsUsage: " ",
		Description: `The leader keeps this list in memory from the claims and heartbeats it
serves (forwarded ones included); after a change of leader it refills as the
workers claim again. TYPES and QUEUES "*" mean every type or queue, "?" a
worker known only from the tasks it holds (it claimed from an earlier leader).`,
		Action: workerListAction,
	})
}

func workerListAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	res, err := fetch(cCtx, func(ctx context.Context, c *rpc.Client) (*rpc.WorkersResult, error) { return c.WorkersList(ctx) })
	if err != nil {
		return err
	}
	return printList(cCtx, res, len(res.Workers), "no workers seen recently; start one with `flowd worker run --type TYPE --exec CMD`", func(tw *tabwriter.Writer) {
		row(tw, "WORKER", "TYPES", "QUEUES", "SLOTS", "IN FLIGHT", "STATE", "LAST CONTACT", "NODE")
		for _, wk := range res.Workers {
			slots := "-"
			if wk.Slots > 0 {
				slots = fmt.Sprint(wk.Slots)
			}
			state := "busy"
			if wk.Waiting {
				state = "claiming"
			}
			types, queues := listOrAll(wk.Types), listOrAll(wk.Queues)
			if wk.LastClaim.IsZero() {
				// Known from its leases only (it claimed from an earlier leader).
				types, queues = "?", "?"
			}
			row(tw, wk.ID, types, queues, slots, wk.InFlight, state, ago(wk.LastSeen), dash(wk.Node))
		}
	})
}

func listOrAll(s []string) string {
	if len(s) == 0 {
		return "*"
	}
	return strings.Join(s, ",")
}
