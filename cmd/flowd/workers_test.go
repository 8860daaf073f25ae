package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/daemon"
	"github.com/flowd/flowd/internal/testing/testagents"
)

// submit --wait warns when the run waits for a task type no worker serves
// (naming the command that starts one), run get shows it, and once a
// worker claims the type the run finishes; worker list shows that worker
// with its types, queues and slots.
func TestCLIWaitingForWorker(t *testing.T) {
	ac := testagents.StartWith(t, 3, discardLogger, func(c *daemon.Config) { c.IdleTypeAfter = 500 * time.Millisecond })
	tc := &testCluster{agents: ac.Agents, stops: ac.Stops, eps: ac.Eps, addr: strings.Join(ac.Eps, ","), dir: ac.Dir}
	defer func(d time.Duration) { workerWarnAfter = d }(workerWarnAfter)
	workerWarnAfter = 500 * time.Millisecond

	r := tc.must(t, 0, "worker", "list")
	if !strings.Contains(r.out, "no workers seen recently") || !strings.Contains(r.out, "flowd worker run --type") {
		t.Fatalf("worker list with no workers:\n%s", r)
	}

	spec := writeFile(t, "lonely.json", `{"name":"lonely","tasks":[{"key":"a","type":"lonely","queue":"side"}]}`)
	stderr := newSignalWriter("warning: no worker has claimed type \"lonely\"")
	var stdout bytes.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(t.Context(), []string{"flowd", "--addr", tc.addr, "submit", "--wait", "--wait-timeout", "15s", spec}, nil, &stdout, stderr)
	}()
	waitFor(t, stderr.found, "the waiting-for-worker warning", stderr)
	if s := stderr.String(); !strings.Contains(s, "`flowd worker run --type lonely --queue side --exec CMD`") {
		t.Fatalf("warning does not say how to start a worker:\n%s", s)
	}

	// run get (any agent) shows it too.
	listed := tc.must(t, 0, "run", "list", "-o", "json")
	var runs struct {
		Runs []struct {
			ID string `json:"id"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(listed.out), &runs); err != nil || len(runs.Runs) != 1 {
		t.Fatalf("run list: %v\n%s", err, listed)
	}
	got := tc.must(t, 0, "run", "get", runs.Runs[0].ID)
	if !strings.Contains(got.out, "a worker for type lonely") {
		t.Fatalf("run get does not show the missing worker type:\n%s", got)
	}
	if run := getRun(t, tc, runs.Runs[0].ID); len(run.WaitingForWorker) != 1 || run.WaitingForWorker[0] != "lonely" {
		t.Fatalf("run get -o json waiting_for_worker %q", run.WaitingForWorker)
	}

	tc.startWorker(t, "lonely")
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("submit --wait exit %d once a worker came\n%s\n%s", code, stdout.String(), stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("submit --wait did not finish once a worker came:\n%s", stderr.String())
	}
	if n := strings.Count(stderr.String(), "warning: no worker"); n != 1 {
		t.Fatalf("warned %d times, want once:\n%s", n, stderr.String())
	}

	r = tc.must(t, 0, "worker", "list")
	var line string
	for _, l := range strings.Split(r.out, "\n") {
		if strings.HasPrefix(l, "test-worker ") {
			line = l
		}
	}
	if f := strings.Fields(line); len(f) < 6 || f[1] != "lonely" || f[2] != "*" {
		t.Fatalf("worker list does not show the worker's types and queues:\n%s", r.out)
	}
	if !strings.HasPrefix(r.out, "WORKER") || !strings.Contains(r.out, "LAST CONTACT") {
		t.Fatalf("worker list header:\n%s", r.out)
	}
}
