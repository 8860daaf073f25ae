package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

// ACL tokens: the CLI side of acl.token.* (docs/operations.md, "Security"),
// and what the global --token and --ca-cert (common.go) give every client.

func init() { commands = append(commands, aclCommand) }

var aclCommand = &cli.Command{
	Name:  "acl",
	Usage: "manage ACL tokens, the roles of clients of the TCP client listener (--client-addr)",
	Subcommands: []*cli.Command{{
		Name:  "token",
		Usage: "create, list and delete tokens",
		Description: "A token is a secret with a role (admin, worker or read). A client of an agent's TCP\n" +
			"client listener gives it with --token (or FLOWD_TOKEN) and gets its role; the agents store\n" +
			"only its SHA-256. Make the first one over the Unix socket, as an admin of the agent.",
		Subcommands: []*cli.Command{
			{
				Name:  "create",
				Usage: "make a token and print its secret (once: it cannot be shown again)",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "role", Usage: "the token's role: admin, worker or read", Required: true},
					&cli.StringFlag{Name: "name", Usage: "a `NAME` for the token (who or what uses it), shown in lists and the audit log"},
				},
				Action: aclTokenCreateAction,
			},
			{Name: "list", Usage: "list tokens: id, name, role, age (never the secrets)", Action: aclTokenListAction},
			{
				Name:      "delete",
				Usage:     "delete a token: its secret stops working and the connections it opened are closed",
				ArgsUsage: "ID",
				Action:    aclTokenDeleteAction,
			},
		},
	}},
}

// clientAuth is the token and TLS configuration of --token and --ca-cert.
func clientAuth(cCtx *cli.Context) (token string, cfg *tls.Config, err error) {
	root := rootCtx(cCtx)
	token = strings.TrimSpace(root.String("token"))
	if ca := root.String("ca-cert"); ca != "" {
		if cfg, err = rpc.ClientTLSConfig(ca); err != nil {
			return "", nil, usageErr(cCtx, "--ca-cert: %v", err)
		}
	}
	return token, cfg, nil
}

func aclTokenCreateAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	role := strings.ToLower(strings.TrimSpace(cCtx.String("role")))
	switch role {
	case "admin", "worker", "read":
	default:
		return usageErr(cCtx, "--role %q: want admin, worker or read", cCtx.String("role"))
	}
	var res *rpc.ACLTokenCreateResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		res, err = c.ACLTokenCreate(ctx, role, cCtx.String("name"))
		return err
	}); err != nil {
		return err
	}
	const once = "The secret cannot be shown again: store it now (clients give it with --token or FLOWD_TOKEN)."
	if jsonOut(cCtx) {
		fmt.Fprintln(cCtx.App.ErrWriter, once)
		return printJSON(cCtx.App.Writer, res)
	}
	w := cCtx.App.Writer
	tw := newTable(w)
	row(tw, "ID:", res.ID)
	row(tw, "Name:", dash(res.Name))
	row(tw, "Role:", res.Role)
	row(tw, "Secret:", res.Secret)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, once)
	return err
}

func aclTokenListAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	var res *rpc.ACLTokenListResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		res, err = c.ACLTokenList(ctx)
		return err
	}); err != nil {
		return err
	}
	if jsonOut(cCtx) {
		return printJSON(cCtx.App.Writer, res)
	}
	if len(res.Tokens) == 0 {
		_, err := fmt.Fprintln(cCtx.App.Writer, "no tokens (make one with `flowd acl token create --role worker --name NAME`)")
		return err
	}
	tw := newTable(cCtx.App.Writer)
	row(tw, "ID", "NAME", "ROLE", "CREATED")
	for _, t := range res.Tokens {
		row(tw, t.ID, dash(t.Name), t.Role, ago(time.UnixMilli(t.CreatedAt)))
	}
	return tw.Flush()
}

func aclTokenDeleteAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 1, "ID"); err != nil {
		return err
	}
	id := strings.TrimSpace(cCtx.Args().First())
	var res *rpc.ChangedResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		res, err = c.ACLTokenDelete(ctx, id)
		return err
	}); err != nil {
		return err
	}
	if jsonOut(cCtx) {
		return printJSON(cCtx.App.Writer, res)
	}
	if !res.Changed {
		return failf("see the token ids with `flowd acl token list`", "no token %q (already deleted, or a typo)", id)
	}
	_, err := fmt.Fprintf(cCtx.App.Writer, "token %s deleted: its secret no longer works and its open connections are closed\n", id)
	return err
}
