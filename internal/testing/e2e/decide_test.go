package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// waitNewest waits until a fresh cluster raised itself to the newest
// state-machine version (daemon/upgrade_fresh.go): workflows that use it
// are refused before.
func (c *cluster) waitNewest() {
	c.t.Helper()
	c.fsmVersions(func(v *rpc.FSMVersion) bool { return v.Active == int(fsm.MaxVersion) })
}

func wantTaskStates(t *testing.T, r *rpc.Run, want map[string]domain.TaskState) {
	t.Helper()
	for _, tk := range r.Tasks {
		if s, ok := want[tk.Key]; ok && tk.State != s {
			t.Errorf("task %s is %s (%s), want %s", tk.Key, tk.State, tk.Error, s)
		}
	}
}

// With real agents and the example worker: a false `when` skips a branch
// and its dependent while a sibling branch runs; a one_failed notifier runs
// only when its dependency failed; an all_done cleanup runs either way;
// run get and the CLI show the skipped tasks and why.
func TestDecisionsWithRealAgents(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNewest()
	cl := c.client()
	w := startWorker(t, c, "wd")
	wf := workflow(t, "decide.yaml")

	id := submit(t, cl, wf)
	r := waitRun(t, cl, id, 30*time.Second)
	if r.State != domain.RunFailed {
		t.Fatalf("decide.yaml: run %s, want failed", r.State)
	}
	wantTaskStates(t, r, map[string]domain.TaskState{
		"build": domain.TaskSucceeded, "deploy-prod": domain.TaskSkipped, "announce": domain.TaskSkipped,
		"deploy-staging": domain.TaskSucceeded, "smoke-test": domain.TaskFailed,
		"page-oncall": domain.TaskSucceeded, "cleanup": domain.TaskSucceeded,
	})
	for _, l := range w.lines() {
		if strings.Contains(l, "deploy-prod") || strings.Contains(l, " announce") {
			t.Fatalf("a skipped task reached the worker: %s", l)
		}
	}
	out, err := exec.Command(flowdBin, "--addr", strings.Join(c.endpoints(), ","), "run", "get", id).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "↷ skipped") || !strings.Contains(string(out), "skipped: when is false") {
		t.Fatalf("run get: %v\n%s", err, out)
	}

	ok := strings.Replace(string(wf), `"fail":true`, `"fail":false`, 1)
	id = submit(t, cl, []byte(ok))
	r = waitRun(t, cl, id, 30*time.Second)
	if r.State != domain.RunSucceeded {
		t.Fatalf("decide.yaml with a passing smoke test: run %s, want succeeded", r.State)
	}
	wantTaskStates(t, r, map[string]domain.TaskState{
		"smoke-test": domain.TaskSucceeded, "page-oncall": domain.TaskSkipped, "cleanup": domain.TaskSucceeded,
	})
	got, err := cl.RunGet(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range got.Tasks {
		if tk.Key == "page-oncall" && tk.Trigger != domain.TriggerOneFailed {
			t.Fatalf("run get does not show page-oncall's trigger: %+v", tk)
		}
	}

	// A condition that does not compile is refused at submit: -32003 with
	// its path and the checker's message.
	bad := strings.Replace(string(wf), `deps.build.result.input.env == \"prod\"`, `deps.build.result.input.env ==`, 1)
	if bad == string(wf) {
		t.Fatal("the example's condition changed: update the test")
	}
	_, err = cl.RunSubmit(t.Context(), rpc.SubmitParams{Workflow: []byte(bad)})
	var se *domain.SpecError
	if !errors.As(err, &se) || len(se.Problems) != 1 || se.Problems[0].Path != "tasks[1].when" || !strings.Contains(se.Problems[0].Message, "Syntax error") {
		t.Fatalf("a bad condition: %v", err)
	}
}
