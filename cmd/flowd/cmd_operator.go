package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

func init() { commands = append(commands, operatorCommand) }

var operatorCommand = &cli.Command{
	Name:  "operator",
	Usage: "cluster membership, leadership and upgrades",
	Subcommands: []*cli.Command{
		{
			Name:  "raft",
			Usage: "the raft configuration",
			Subcommands: []*cli.Command{
				{Name: "list-peers", Usage: "the servers of the raft configuration and who leads", Action: raftListAction},
				{
					Name:      "add-peer",
					Usage:     "add a voter (start its agent first, with the same --peers plus itself)",
					ArgsUsage: "ID ADDR (the new node's id and raft address host:port)",
					Action:    raftAddAction,
				},
				{Name: "remove-peer", Usage: "remove a server from the configuration", ArgsUsage: "ID", Action: raftRemoveAction},
				{
					Name:      "transfer-leadership",
					Usage:     "hand leadership to another node (ID, or any up-to-date one)",
					ArgsUsage: "[ID]",
					Action:    raftTransferAction,
				},
			},
		},
		upgradeCommand,   // cmd_upgrade.go
		autopilotCommand, // cmd_autopilot.go
	},
}

func raftListAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	var res rpc.PeersResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) error {
		return c.CallIdempotent(ctx, rpc.MethodRaftPeers, struct{}{}, &res)
	}); err != nil {
		return err
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		if res.Peers == nil {
			res.Peers = []rpc.Peer{}
		}
		return printJSON(w, res)
	}
	tw := newTable(w)
	row(tw, "ID", "ADDRESS", "SUFFRAGE", "STATE", "RELEASE", "FSM VERSIONS")
	for _, p := range res.Peers {
		release, versions := "-", "-"
		if m := p.Member; m != nil {
			release, versions = dash(m.Release), memberRange(*m)
		}
		row(tw, p.ID, p.Address, p.Suffrage, dash(p.State), release, versions)
	}
	return tw.Flush()
}

func raftAddAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 2, 2, "ID ADDR"); err != nil {
		return err
	}
	id, addr := cCtx.Args().Get(0), cCtx.Args().Get(1)
	return raftOp(cCtx, rpc.MethodRaftAddPeer, rpc.PeerParams{ID: id, Address: addr}, true, fmt.Sprintf("added %s (%s) as a voter", id, addr))
}

func raftRemoveAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 1, "ID"); err != nil {
		return err
	}
	id := cCtx.Args().First()
	return raftOp(cCtx, rpc.MethodRaftRemovePeer, rpc.PeerParams{ID: id}, true, "removed "+id)
}

func raftTransferAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 1, "[ID]"); err != nil {
		return err
	}
	id := cCtx.Args().First()
	what := "leadership transferred"
	if id != "" {
		what += " to " + id
	}
	return raftOp(cCtx, rpc.MethodRaftTransfer, rpc.PeerParams{ID: id}, false, what)
}

func raftOp(cCtx *cli.Context, method string, p rpc.PeerParams, idempotent bool, what string) error {
	var res rpc.OK
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) error {
		if idempotent {
			return c.CallIdempotent(ctx, method, p, &res)
		}
		return c.Call(ctx, method, p, &res)
	}); err != nil {
		return err
	}
	if jsonOut(cCtx) {
		return printJSON(cCtx.App.Writer, res)
	}
	fmt.Fprintln(cCtx.App.Writer, what)
	return nil
}
