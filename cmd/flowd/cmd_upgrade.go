package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

// upgradeCommand shows and raises the cluster's state-machine version
// (docs/operations.md, "Rolling upgrades").
var upgradeCommand = &cli.Command{
	Name:  "upgrade",
	Usage: "rolling upgrades: the cluster's state-machine version and what each member applies",
	Subcommands: []*cli.Command{
		{Name: "status", Usage: "the active state-machine version, each member's release and range, and what finalize would do", Action: upgradeStatusAction},
		{
			Name:   "finalize",
			Usage:  "raise the active version to the highest one every voter applies (after every agent runs the new release; there is no way back below it)",
			Action: upgradeFinalizeAction,
		},
	},
}

func memberRange(m rpc.MemberVersion) string {
	if m.Max == 0 {
		return "unknown: " + m.Error
	}
	s := fmt.Sprintf("%d-%d", m.Min, m.Max)
	if m.Error != "" {
		s += " (" + m.Error + ")"
	}
	return s
}

func upgradeStatusAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	var st rpc.UpgradeStatus
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) error {
		return c.CallIdempotent(ctx, rpc.MethodUpgradeStatus, struct{}{}, &st)
	}); err != nil {
		return err
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, st)
	}
	fmt.Fprintf(w, "active state-machine version: %d\n", st.Active)
	tw := newTable(w)
	row(tw, "ID", "VOTER", "RELEASE", "FSM VERSIONS")
	for _, m := range st.Members {
		row(tw, m.ID, fmt.Sprint(m.Voter), dash(m.Release), memberRange(m))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case st.Blocker != "":
		fmt.Fprintf(w, "finalize would not raise the version: %s\n", st.Blocker)
	case st.Target > st.Active:
		fmt.Fprintf(w, "every voter applies version %d: `flowd operator upgrade finalize` raises the cluster to it (no way back below it)\n", st.Target)
		if st.EligibleSinceMS > 0 && st.AutoFinalizeAfter != "" {
			fmt.Fprintf(w, "the leader raises it on its own at %s (--upgrade-auto-finalize %s)\n",
				time.UnixMilli(st.EligibleSinceMS).Add(mustDuration(st.AutoFinalizeAfter)).Format(time.RFC3339), st.AutoFinalizeAfter)
		}
	default:
		fmt.Fprintln(w, "the cluster runs the newest version every voter applies")
	}
	return nil
}

func mustDuration(s string) time.Duration {
	d, _ := time.ParseDuration(s)
	return d
}

func upgradeFinalizeAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	var res rpc.UpgradeResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) error {
		return c.CallIdempotent(ctx, rpc.MethodUpgradeFinalize, struct{}{}, &res)
	}); err != nil {
		return err
	}
	if jsonOut(cCtx) {
		return printJSON(cCtx.App.Writer, res)
	}
	if res.Changed {
		fmt.Fprintf(cCtx.App.Writer, "state-machine version raised from %d to %d\n", res.From, res.To)
	} else {
		fmt.Fprintf(cCtx.App.Writer, "already at version %d, the newest every voter applies\n", res.To)
	}
	return nil
}
