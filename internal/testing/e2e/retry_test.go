package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// flowd run retry re-runs only the failed task of a failed run, with real
// agents and the example worker, and the run succeeds: the task that
// succeeded is not called again.
func TestRunRetryWithRealAgents(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNewest()
	cl := c.client()
	w := startWorker(t, c, "wr")
	id := submit(t, cl, workflow(t, "retry.yaml"))
	if r := waitRun(t, cl, id, 30*time.Second); r.State != domain.RunFailed {
		t.Fatalf("retry.yaml: run %s, want failed first", r.State)
	}
	out, err := exec.Command(flowdBin, "--addr", strings.Join(c.endpoints(), ","), "run", "retry", id).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "retried: call-api, report again") {
		t.Fatalf("run retry: %v\n%s", err, out)
	}
	if r := waitRun(t, cl, id, 30*time.Second); r.State != domain.RunSucceeded {
		t.Fatalf("after retry: run %s", r.State)
	}
	calls := map[string]int{}
	for _, l := range w.lines() {
		if strings.HasPrefix(l, "call ") {
			calls[strings.Fields(l)[2]]++
		}
	}
	if calls["fetch"] != 1 || calls["call-api"] != 2 || calls["report"] != 1 {
		t.Fatalf("handler calls %v: want fetch once, call-api twice, report once", calls)
	}
	if tk := task(t, cl, id+"/call-api"); tk.Attempt != 2 || len(tk.Attempts) != 2 {
		t.Fatalf("call-api history: %+v", tk.Attempts)
	}
}
