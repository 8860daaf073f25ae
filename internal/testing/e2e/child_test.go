package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/rpc/defrpc"
)

// A child run started from a definition completes and its parent's
// dependent receives the child's result; cancelling a parent cancels its
// running child (examples/workflows/child.yaml, etl.yaml as the
// definition, the example worker).
func TestChildRunsWithRealAgents(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNewest()
	cl := c.client()
	startWorker(t, c, "wc")
	if _, err := defrpc.Put(t.Context(), cl, defrpc.PutParams{Workflow: workflow(t, "etl.yaml")}); err != nil {
		t.Fatal(err)
	}
	id := submit(t, cl, workflow(t, "child.yaml"))
	r := waitRun(t, cl, id, 30*time.Second)
	if r.State != domain.RunSucceeded {
		t.Fatalf("parent %s", r.State)
	}
	got, err := cl.RunGet(t.Context(), id)
	if err != nil || got.Children["etl"] == "" {
		t.Fatalf("run get: children %v %v", got.Children, err)
	}
	child, err := cl.RunGet(t.Context(), got.Children["etl"])
	if err != nil || child.ParentID != id || child.State != domain.RunSucceeded || child.Definition != "etl" {
		t.Fatalf("child %+v %v", child, err)
	}
	var etl map[string]map[string]any
	if err := json.Unmarshal(task(t, cl, id+"/etl").Result, &etl); err != nil || etl["load"]["total"] != 42.0 {
		t.Fatalf("etl task result %s", task(t, cl, id+"/etl").Result)
	}
	var rep struct {
		Deps int `json:"deps"`
	}
	if err := json.Unmarshal(task(t, cl, id+"/report").Result, &rep); err != nil || rep.Deps != 1 {
		t.Fatalf("report did not receive the child's result: %s", task(t, cl, id+"/report").Result)
	}

	// Cancel: a child that waits (its task type has no worker) is
	// cancelled with its parent.
	if _, err := defrpc.Put(t.Context(), cl, defrpc.PutParams{Workflow: json.RawMessage(`{"name":"stuck","tasks":[{"key":"x","type":"nobody"}]}`)}); err != nil {
		t.Fatal(err)
	}
	id = submit(t, cl, json.RawMessage(`{"tasks":[{"key":"sub","type":"run","definition":"stuck"}]}`))
	var kid string
	testutil.Eventually(t, 20*time.Second, 20*time.Millisecond, "the parent's child run", func() error {
		g, err := cl.RunGet(t.Context(), id)
		if err != nil {
			return err
		}
		if kid = g.Children["sub"]; kid == "" {
			return fmt.Errorf("run %s has no child yet (state %s)", id, g.State)
		}
		return nil
	})
	if _, err := cl.RunVerb(t.Context(), rpc.MethodRunCancel, id, "test"); err != nil {
		t.Fatal(err)
	}
	if r := waitRun(t, cl, kid, 10*time.Second); r.State != domain.RunCancelled {
		t.Fatalf("child of a cancelled parent: %s", r.State)
	}
}
