package rpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testing/testagents"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// A FailFast client of a cluster that lost two of its three agents: a
// write, and a consistent read, end with ErrNoQuorum in about a second
// instead of at their deadline; a read of the survivor's local state
// answers; a client without FailFast still waits (its context).
func TestFailFastNoQuorum(t *testing.T) {
	cl := testagents.Start(t, 3, nil)
	c, err := rpc.NewClient(cl.Eps, rpc.ClientOptions{FailFast: true, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	spec := rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t"}]}`)}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	sub, err := c.RunSubmit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	// The survivor must hold the run before the others go (a commit needs
	// only two of three).
	survivor, err := rpc.NewClient(cl.Eps[2:], rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer survivor.Close()
	// polling another agent's applied state
	testutil.EventuallyTrue(t, 10*time.Second, 20*time.Millisecond, "the run to reach n3", func() bool {
		var list rpc.ListResult
		err := survivor.CallIdempotent(t.Context(), rpc.MethodRunList, rpc.ListParams{}, &list)
		return err == nil && len(list.Runs) == 1
	})
	cl.Stops[0]()
	cl.Stops[1]()

	for name, call := range map[string]func(context.Context) error{
		"submit": func(ctx context.Context) error { _, err := c.RunSubmit(ctx, spec); return err },
		"consistent get": func(ctx context.Context) error {
			return c.CallIdempotent(ctx, rpc.MethodRunGet, rpc.IDParams{ID: sub.ID, Consistent: true}, new(rpc.Run))
		},
		"consistent list": func(ctx context.Context) error {
			return c.CallIdempotent(ctx, rpc.MethodRunList, rpc.ListParams{Consistent: true}, new(rpc.ListResult))
		},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		t0 := time.Now()
		err := call(ctx)
		took := time.Since(t0)
		cancel()
		var re *rpc.ReachError
		if !errors.Is(err, rpc.ErrNoQuorum) || !errors.As(err, &re) || re.Reachable != 1 || re.Voters != 3 {
			t.Fatalf("%s: %v", name, err)
		}
		// The stopped agents took leadership with them; the survivor may
		// still follow the old leader for a heartbeat timeout, then it is
		// a candidate: well under the 10 s deadline either way.
		if took > 3*time.Second {
			t.Fatalf("%s answered after %v", name, took)
		}
		t.Logf("%s: %v after %v", name, err, took.Round(time.Millisecond))
	}
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var list rpc.ListResult
	if err := c.CallIdempotent(ctx, rpc.MethodRunList, rpc.ListParams{}, &list); err != nil || len(list.Runs) != 1 {
		t.Fatalf("local read without a quorum: %v (%d runs)", err, len(list.Runs))
	}
}
