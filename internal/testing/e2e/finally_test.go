package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// A finally task runs after success, after failure and after a revert, and
// sees the outcome; the run takes the body's outcome (examples/workflows/
// finally.yaml with the example worker).
func TestFinallyWithRealAgents(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNewest()
	cl := c.client()
	startWorker(t, c, "wf")
	base := string(workflow(t, "finally.yaml"))
	for _, tc := range []struct {
		name, wf string
		want     domain.RunState
	}{
		{"revert", base, domain.RunReverted},
		{"failure", strings.Replace(base, `"on_failure":"revert"`, `"on_failure":"fail"`, 1), domain.RunFailed},
		{"success", strings.Replace(base, `"fail":true`, `"fail":false`, 1), domain.RunSucceeded},
	} {
		if tc.wf == base && tc.name != "revert" {
			t.Fatalf("%s: the example changed; update the test", tc.name)
		}
		id := submit(t, cl, json.RawMessage(tc.wf))
		r := waitRun(t, cl, id, 30*time.Second)
		if r.State != tc.want {
			t.Fatalf("%s: run %s, want %s", tc.name, r.State, tc.want)
		}
		rep := task(t, cl, id+"/report")
		var res struct {
			Input struct {
				Outcome struct {
					State  string   `json:"state"`
					Failed []string `json:"failed"`
				} `json:"outcome"`
				Input map[string]string `json:"input"`
			} `json:"input"`
		}
		if rep.State != domain.TaskSucceeded || json.Unmarshal(rep.Result, &res) != nil ||
			res.Input.Outcome.State != string(tc.want) || res.Input.Input["channel"] != "ops" {
			t.Fatalf("%s: report %s, result %s", tc.name, rep.State, rep.Result)
		}
		if tc.want != domain.RunSucceeded && strings.Join(res.Input.Outcome.Failed, ",") != "ship-tickets" {
			t.Fatalf("%s: failed tasks %v", tc.name, res.Input.Outcome.Failed)
		}
		if rep.FinishedAt.Before(r.Tasks[0].FinishedAt) {
			t.Fatalf("%s: report finished before the body", tc.name)
		}
		got, err := cl.RunGet(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range got.Tasks {
			if tk.Key == "report" && !tk.Finally {
				t.Fatalf("run get does not mark report as a finally task")
			}
		}
	}
}
