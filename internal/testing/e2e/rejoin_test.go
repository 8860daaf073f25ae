package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/rpc"
)

// A follower that was down while large entries were committed catches up
// when it comes back: it receives them in big batches, which must fit the
// state store's transactions (it used to crash-loop with "Txn is too big to
// fit into one request"), and ends with the others' state.
func TestLaggingFollowerRejoinsAfterLargeEntries(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.waitLeader()
	lag := c.followers(leader)[0]
	c.kill9(lag)
	cl := c.client(leader)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	big := json.RawMessage(`{"pad":"` + strings.Repeat("x", 900<<10) + `"}`)
	for range 16 {
		wf := json.RawMessage(`{"tasks":[{"key":"a","type":"t","input":` + string(big) + `}]}`)
		if _, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: wf}); err != nil {
			t.Fatal(err)
		}
	}
	c.restart(lag)
	sameState(t, c) // fails if the lagging node stops or diverges
}
