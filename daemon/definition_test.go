package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/rpc/defrpc"
)

// Workflow definitions through a follower (forwarded to the leader): put
// (versions assigned, a version never changes), list, get, and runs
// submitted by name (the latest version) or name@version, run by a worker,
// recorded in run.get and filtered in run.list.
func TestDefinitionsThroughAFollower(t *testing.T) {
	agents := startAgents(t, 3)
	_, fs := followers(agents)
	c := client(t, fs[0])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wf := func(typ string) json.RawMessage {
		return json.RawMessage(`{"name":"etl","tasks":[{"key":"a","type":"` + typ + `"}]}`)
	}

	r1, err := defrpc.Put(ctx, c, defrpc.PutParams{Workflow: wf("v1")})
	if err != nil || !r1.Created || r1.Version != 1 || r1.Name != "etl" {
		t.Fatalf("put: %+v %v", r1, err)
	}
	if again, err := defrpc.Put(ctx, c, defrpc.PutParams{Workflow: wf("v1")}); err != nil || again.Created || again.Version != 1 {
		t.Fatalf("put again: %+v %v", again, err)
	}
	_, err = defrpc.Put(ctx, c, defrpc.PutParams{Version: 1, Workflow: wf("other")})
	if !errors.Is(err, domain.ErrInvalidArgument) || !strings.Contains(err.Error(), "put it without a version") {
		t.Fatalf("changing version 1: %v", err)
	}
	if _, err := defrpc.Put(ctx, c, defrpc.PutParams{Name: "billing", Workflow: wf("v1")}); !errors.Is(err, domain.ErrInvalidArgument) {
		t.Fatalf("name differs from the workflow's: %v", err)
	}
	if r2, err := defrpc.Put(ctx, c, defrpc.PutParams{Workflow: wf("v2"), Note: "faster"}); err != nil || !r2.Created || r2.Version != 2 {
		t.Fatalf("put v2: %+v %v", r2, err)
	}
	list, err := defrpc.List(ctx, c)
	if err != nil || len(list.Definitions) != 1 || list.Definitions[0].Latest != 2 || list.Definitions[0].Versions != 2 || list.Definitions[0].Note != "faster" {
		t.Fatalf("list: %+v %v", list, err)
	}
	d, err := defrpc.Get(ctx, c, defrpc.GetParams{Name: "etl", Versions: true})
	if err != nil || d.Version != 2 || d.Latest != 2 || d.Spec == nil || d.Spec.Tasks[0].Type != "v2" || len(d.Versions) != 2 {
		t.Fatalf("get latest: %+v %v", d, err)
	}
	if d, err = defrpc.Get(ctx, c, defrpc.GetParams{Name: "etl@1"}); err != nil || d.Version != 1 || d.Spec.Tasks[0].Type != "v1" || d.Latest != 2 {
		t.Fatalf("get etl@1: %+v %v", d, err)
	}
	if _, err = defrpc.Get(ctx, c, defrpc.GetParams{Name: "etl@7"}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("get etl@7: %v", err)
	}

	// Submit by name: the latest version runs (a worker of v2's type gets it).
	sub, err := c.RunSubmit(ctx, rpc.SubmitParams{Definition: "etl", Labels: map[string]string{"team": "data"}})
	if err != nil || !sub.Created {
		t.Fatalf("submit by definition: %+v %v", sub, err)
	}
	tasks, err := c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "w", Types: []string{"v2"}, WaitMS: 5000})
	if err != nil || len(tasks) != 1 || tasks[0].RunID != sub.ID {
		t.Fatalf("claim v2: %+v %v", tasks, err)
	}
	if ack, err := c.TaskComplete(ctx, rpc.CompleteParams{TaskID: tasks[0].TaskID, FencingToken: tasks[0].FencingToken}); err != nil || !ack.Accepted {
		t.Fatalf("complete: %+v %v", ack, err)
	}
	w, err := c.RunWait(ctx, sub.ID, 5000)
	if err != nil || !w.Done || w.Run.State != domain.RunSucceeded {
		t.Fatalf("wait: %+v %v", w, err)
	}
	run, err := c.RunGet(ctx, sub.ID)
	if err != nil || run.Definition != "etl" || run.DefinitionVersion != 2 || run.Workflow != "etl" || run.Spec == nil || run.Spec.Tasks[0].Type != "v2" {
		t.Fatalf("run.get: %+v %v", run, err)
	}
	pinned, err := c.RunSubmit(ctx, rpc.SubmitParams{Definition: "etl@1"})
	if err != nil || !pinned.Created {
		t.Fatalf("submit etl@1: %+v %v", pinned, err)
	}
	inline, err := c.RunSubmit(ctx, rpc.SubmitParams{Workflow: wf("v1")})
	if err != nil {
		t.Fatal(err)
	}

	// run.list by definition (any version) and by name@version.
	ids := func(def string) []string {
		res, err := c.RunList(ctx, rpc.ListParams{Definition: def})
		if err != nil {
			t.Fatalf("list %s: %v", def, err)
		}
		var out []string
		for _, r := range res.Runs {
			out = append(out, r.ID)
		}
		return out
	}
	if got := ids("etl"); len(got) != 2 || got[0] != pinned.ID || got[1] != sub.ID {
		t.Fatalf("runs of etl: %v, want %s %s (not the inline %s)", got, pinned.ID, sub.ID, inline.ID)
	}
	if got := ids("etl@1"); len(got) != 1 || got[0] != pinned.ID {
		t.Fatalf("runs of etl@1: %v", got)
	}

	// Exactly one of workflow and definition; unknown ones are not found.
	if _, err := c.RunSubmit(ctx, rpc.SubmitParams{Definition: "etl", Workflow: wf("v1")}); !errors.Is(err, domain.ErrInvalidArgument) {
		t.Fatalf("both: %v", err)
	}
	if _, err := c.RunSubmit(ctx, rpc.SubmitParams{}); !errors.Is(err, domain.ErrInvalidArgument) {
		t.Fatalf("neither: %v", err)
	}
	if _, err := c.RunSubmit(ctx, rpc.SubmitParams{Definition: "nope"}); !errors.Is(err, domain.ErrNotFound) || !strings.Contains(err.Error(), "flowd def") {
		t.Fatalf("unknown definition: %v", err)
	}
	if _, err := c.RunSubmit(ctx, rpc.SubmitParams{Definition: "etl@x"}); !errors.Is(err, domain.ErrInvalidArgument) {
		t.Fatalf("bad version: %v", err)
	}
}
