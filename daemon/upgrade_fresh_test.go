package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// waitFresh waits until every agent applied the fresh cluster's raise to
// the newest state-machine version (upgrade_fresh.go).
func waitFresh(t testing.TB, ctx context.Context, agents []*Agent) {
	t.Helper()
	within := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		within = time.Until(d)
	}
	for _, a := range agents {
		testutil.Eventually(t, within, 10*time.Millisecond, a.cfg.NodeID+" at the newest state-machine version", func() error {
			if v := a.state.ActiveVersion(); v != fsm.MaxVersion {
				return fmt.Errorf("active version %d, want %d", v, fsm.MaxVersion)
			}
			return nil
		})
	}
}

// A fresh cluster starts at the newest version without a finalize and with
// auto-finalize off (startAgents' config has none), and then accepts a
// workflow that uses it.
func TestFreshClusterStartsAtTheNewestVersion(t *testing.T) {
	agents := startAgents(t, 3) // waits for the raise (waitFresh)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := client(t, agents[0])
	_, err := c.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t","when":"true"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	var fp freshPoller
	if _, ok := fp.next(agents[0]); ok {
		t.Fatal("the fresh check still runs on a cluster at its newest version with a run")
	}
}

// The agent refuses a spec with version-2 fields while the cluster runs
// version 1, naming the version and the finalize command, before anything
// is proposed.
func TestSpecWithV2FieldsRefusedBelowV2(t *testing.T) {
	spec := domain.Spec{Tasks: []domain.TaskSpec{{Key: "a", Type: "t", When: "true"}}}
	err := fsm.SpecNeedsVersion(spec, fsm.V1)
	if !errors.Is(err, fsm.ErrNeedsVersion) || !strings.Contains(err.Error(), "flowd operator upgrade finalize") {
		t.Fatalf("got %v", err)
	}
	var e *rpc.Error
	if !errors.As(rpc.ToError(err), &e) || e.Code != rpc.CodeInvalidParams {
		t.Fatalf("wire error %v", rpc.ToError(err))
	}
}

// The first write of a fresh cluster does not race the upgrade loop: a
// submit that reaches the leader while the state is fresh and below the
// newest version raises the version first, so a workflow that needs the
// new version is accepted at once (the seam agent runs no upgrade loop:
// only the gate can have raised it). Once the state holds a run the gate
// no longer raises anything.
func TestFirstWriteOfAFreshClusterRaisesTheVersionFirst(t *testing.T) {
	a, _ := oneNodeAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if v := a.state.ActiveVersion(); v != fsm.V1 {
		t.Fatalf("a new one-node cluster without the upgrade loop runs version %d, want 1", v)
	}
	sub, err := a.runSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t","when":"true"}]}`)})
	if err != nil || !sub.Created {
		t.Fatalf("first submit with a when condition on a fresh cluster: %+v %v", sub, err)
	}
	if v := a.state.ActiveVersion(); v != fsm.MaxVersion {
		t.Fatalf("after the first submit the cluster runs version %d, want %d", v, fsm.MaxVersion)
	}
}
