package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/worker"
)

// A drained worker leaves `worker list` as soon as its last claim ends
// (it half-closes its claim connection), not after the registry's
// two-minute forget window; connected to a follower too.
func TestDrainedWorkerLeavesWorkerList(t *testing.T) {
	tc := startCluster(t)
	for i, ep := range []string{tc.eps[0], tc.addr} {
		id := fmt.Sprintf("drained-%d", i)
		w, err := worker.New([]string{ep}, worker.Options{ID: id, Logger: discardLogger, ClaimWait: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		w.Register("leave-test", func(context.Context, *worker.Task) (any, error) { return nil, nil })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		listed := func() bool {
			r := tc.flowd(t, "worker", "list", "-o", "json")
			return strings.Contains(r.out, `"`+id+`"`)
		}
		testutil.EventuallyTrue(t, 10*time.Second, 50*time.Millisecond, id+" in worker list", listed)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("drain: %v", err)
		}
		testutil.EventuallyTrue(t, 5*time.Second, 50*time.Millisecond, id+" gone from worker list", func() bool { return !listed() })
	}
	// A worker that claims again after leaving is listed again.
	c := tc.client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "drained-0", Types: []string{"leave-test"}, Max: 1, WaitMS: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := c.WorkersList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Workers, func(w rpc.Worker) bool { return w.ID == "drained-0" }) {
		t.Fatalf("drained-0 claimed again but is not listed: %+v", res.Workers)
	}
}
