package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

// autopilotCommand shows the leader's autopilot view (server health,
// failure tolerance; docs/operations.md, "Autopilot").
var autopilotCommand = &cli.Command{
	Name:  "autopilot",
	Usage: "server health and dead-server cleanup, as the leader's autopilot sees them",
	Subcommands: []*cli.Command{
		{Name: "state", Usage: "each server's health, and how many servers the cluster can lose", Action: autopilotStateAction},
	},
}

func autopilotStateAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	var st rpc.AutopilotState
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) error {
		return c.CallIdempotent(ctx, rpc.MethodAutopilotState, struct{}{}, &st)
	}); err != nil {
		return err
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, st)
	}
	verdict := "healthy"
	if !st.Healthy {
		verdict = "unhealthy"
	}
	fmt.Fprintf(w, "cluster %s; it can lose %d server(s) and keep a quorum; dead-server cleanup %s\n",
		verdict, st.FailureTolerance, map[bool]string{true: "on", false: "off"}[st.CleanupDeadServers])
	tw := newTable(w)
	row(tw, "ID", "ADDRESS", "STATUS", "VOTER", "HEALTHY", "STABLE FOR", "LAST CONTACT", "LAST INDEX")
	for _, s := range st.Servers {
		stable := "-"
		if s.StableSinceMS > 0 && s.Healthy {
			stable = time.Since(time.UnixMilli(s.StableSinceMS)).Truncate(time.Second).String()
		}
		id := s.ID
		if s.Leader {
			id += " (leader)"
		}
		row(tw, id, s.Address, s.Status, fmt.Sprint(s.Voter), fmt.Sprint(s.Healthy), stable,
			(time.Duration(s.LastContactMS) * time.Millisecond).String(), fmt.Sprint(s.LastIndex))
	}
	return tw.Flush()
}
