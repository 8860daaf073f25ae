package worker

import (
	"context"
	"github.com/flowd/flowd/internal/testing/testagents"
	"strings"
	"testing"

	"github.com/flowd/flowd/rpc"
)

// A completion claims the slot's next task in the same call, so a worker
// working through a backlog long-polls task.claim about once, not once per
// task; with NoClaimOnComplete it claims once per task. Counted by the
// agents themselves (flowd_rpc_requests_total, each request counted by the
// agent the worker sent it to).
func TestCompletionsClaimTheNextTask(t *testing.T) {
	for _, tc := range []struct {
		name      string
		noClaim   bool
		maxClaims int
		minClaims int
	}{
		{"claim with completion", false, 2, 1},
		{"long polls only", true, 1 << 30, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := startAgents(t)
			e := &env{t: t, eps: ta.Eps}
			c, err := newClientFor(ta.Eps)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			e.c = c
			var keys []string
			for i := range 20 {
				keys = append(keys, `{"key":"k`+string(rune('a'+i))+`","type":"t"}`)
			}
			id := e.submit(`{"tasks":[` + strings.Join(keys, ",") + `]}`)
			before := total(t, ta)
			w := e.worker(Options{Concurrency: 1, NoClaimOnComplete: tc.noClaim})
			ran := 0
			w.Register("t", func(context.Context, *Task) (any, error) { ran++; return "ok", nil })
			e.start(w)
			if r := e.wait(id); r.State != "succeeded" {
				t.Fatalf("run %s", r.State)
			}
			after := total(t, ta)
			claims := after["task.claim"] - before["task.claim"]
			completes := after["task.complete"] - before["task.complete"]
			if ran != 20 || completes != 20 {
				t.Fatalf("ran %d tasks, %d completions; want 20 each", ran, completes)
			}
			if claims < tc.minClaims || claims > tc.maxClaims {
				t.Fatalf("%d task.claim requests for 20 tasks, want %d..%d", claims, tc.minClaims, tc.maxClaims)
			}
		})
	}
}

// total sums every agent's request counts.
func total(t *testing.T, ta *testagents.Cluster) map[string]int {
	out := map[string]int{}
	for _, a := range ta.Agents {
		for m, n := range requests(t, a) {
			out[m] += n
		}
	}
	return out
}

func newClientFor(eps []string) (*rpc.Client, error) { return rpc.NewClient(eps, rpc.ClientOptions{}) }
