package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

// alreadyLeads reports (and says) that id leads already, so a transfer to
// it has nothing to do: the agent answers such a transfer with success,
// which "leadership transferred" would misreport.
func alreadyLeads(cCtx *cli.Context, id string) (bool, error) {
	var st *rpc.ClusterStatus
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		st, err = c.ClusterStatus(ctx)
		return err
	}); err != nil {
		return false, err
	}
	if st.LeaderID != id {
		return false, nil
	}
	if jsonOut(cCtx) {
		return true, printJSON(cCtx.App.Writer, map[string]any{"ok": true, "already_leader": true, "leader": id})
	}
	fmt.Fprintf(cCtx.App.Writer, "%s already leads: nothing to transfer\n", id)
	return true, nil
}
