package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/rpc/defrpc"
)

// repoRoot is the repository root: this package is internal/testing/e2e.
func repoRoot() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "..")
}

// workflow reads an example workflow (YAML or JSON) as JSON.
func workflow(t testing.TB, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "workflows", name))
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// workerProc is an example-worker process with a journal of handler calls.
type workerProc struct {
	cmd     *exec.Cmd
	journal string
	exited  chan error
}

func startWorker(t testing.TB, c *cluster, id string, endpoints ...string) *workerProc {
	t.Helper()
	if len(endpoints) == 0 {
		endpoints = c.endpoints()
	}
	w := &workerProc{journal: filepath.Join(t.TempDir(), id+".journal"), exited: make(chan error, 1)}
	w.cmd = exec.Command(workerBin, "--addr", strings.Join(endpoints, ","), "--id", id, "--journal", w.journal, "--concurrency", "4")
	logf, _ := os.Create(w.journal + ".log")
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.exited <- w.cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.cmd.Process.Kill()
		select {
		case <-w.exited:
		case <-time.After(5 * time.Second):
		}
	})
	return w
}

func (w *workerProc) lines() []string {
	b, _ := os.ReadFile(w.journal)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// waitJournal waits until the journal has a line containing want.
func (w *workerProc) waitJournal(t testing.TB, want string) {
	t.Helper()
	// watching another process's file
	testutil.Eventually(t, 20*time.Second, 25*time.Millisecond, fmt.Sprintf("the journal to show %q", want), func() error {
		lines := w.lines()
		for _, l := range lines {
			if strings.Contains(l, want) {
				return nil
			}
		}
		b, _ := os.ReadFile(w.journal + ".log")
		return fmt.Errorf("journal %v\nworker log:\n%s", lines, tail(string(b), 20))
	})
}

func submit(t testing.TB, c *rpc.Client, wf json.RawMessage) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.RunSubmit(ctx, rpc.SubmitParams{Workflow: wf})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

func waitRun(t testing.TB, c *rpc.Client, id string, d time.Duration) *rpc.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Second)
	defer cancel()
	w, err := c.RunWait(ctx, id, d.Milliseconds())
	if err != nil {
		t.Fatal(err)
	}
	if !w.Done {
		t.Fatalf("run %s not done after %v: %s %v", id, d, w.Run.State, w.Run.Counts)
	}
	return &w.Run
}

func task(t testing.TB, c *rpc.Client, id string) *rpc.Task {
	t.Helper()
	tk, err := c.TaskGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

const longTask = `{"name":"long","tasks":[{"key":"work","type":"long","lease_ms":1000,"retry":{"max_attempts":3,"initial_backoff_ms":10},"input":{"seconds":%s}}]}`

func longWF(seconds string) json.RawMessage {
	return json.RawMessage(strings.Replace(longTask, "%s", seconds, 1))
}

func TestWorkerSIGTERMFinishesTask(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	w := startWorker(t, c, "wt")
	id := submit(t, cl, longWF("1.5"))
	w.waitJournal(t, "call long work")
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-w.exited:
		if err != nil {
			t.Fatalf("worker exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not drain")
	}
	r := waitRun(t, cl, id, 10*time.Second)
	if r.State != domain.RunSucceeded {
		t.Fatalf("run %s", r.State)
	}
	if tk := task(t, cl, id+"/work"); tk.Attempt != 1 {
		t.Fatalf("drained task took %d attempts", tk.Attempt)
	}
}

// waitAcked waits until the worker holding the task's lease acknowledged
// it: its first heartbeat moves the lease expiry.
func waitAcked(t *testing.T, cl *rpc.Client, id string) {
	t.Helper()
	first := task(t, cl, id).LeaseExpiresAt
	// polling the replicated state
	testutil.EventuallyTrue(t, 10*time.Second, 20*time.Millisecond, id+"'s first heartbeat", func() bool {
		return !task(t, cl, id).LeaseExpiresAt.Equal(first)
	})
}

func TestWorkerSIGKILLLeaseExpiresOtherWorkerCompletes(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	a := startWorker(t, c, "wa")
	id := submit(t, cl, longWF("2"))
	a.waitJournal(t, "call long work")
	waitAcked(t, cl, id+"/work") // killed before that, the expiry would not count
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.exited
	startWorker(t, c, "wb")
	r := waitRun(t, cl, id, 20*time.Second)
	tk := task(t, cl, id+"/work")
	if r.State != domain.RunSucceeded || len(tk.Attempts) != 2 ||
		tk.Attempts[0].Worker != "wa" || tk.Attempts[0].Outcome != "lease_expired" ||
		tk.Attempts[1].Worker != "wb" || tk.Attempts[1].Outcome != "succeeded" {
		t.Fatalf("run %s attempts %+v", r.State, tk.Attempts)
	}
}

func TestWorkerSIGSTOPPastLeaseIsFenced(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	a := startWorker(t, c, "wa")
	id := submit(t, cl, longWF("30"))
	a.waitJournal(t, "call long work")
	waitAcked(t, cl, id+"/work")
	_ = a.cmd.Process.Signal(syscall.SIGSTOP)
	// The lease (1 s) expires while wa is stopped; wb takes the task over.
	b := startWorker(t, c, "wb")
	b.waitJournal(t, "call long work")
	stale := task(t, cl, id+"/work").Attempts[0]
	_ = a.cmd.Process.Signal(syscall.SIGCONT)
	// wa's next heartbeat comes back accepted:false: its handler's context
	// is cancelled and its result is never reported as current.
	a.waitJournal(t, "cancelled long work")
	ack, err := cl.TaskComplete(context.Background(), rpc.CompleteParams{TaskID: id + "/work", FencingToken: stale.FencingToken, Result: json.RawMessage(`"late"`)})
	if err != nil || ack.Accepted {
		t.Fatalf("completion with wa's token: %+v %v", ack, err)
	}
	tk := task(t, cl, id+"/work")
	if stale.Outcome != "lease_expired" || tk.LeaseOwner != "wb" || tk.State != domain.TaskRunning {
		t.Fatalf("stale %+v, now owner %s state %s", stale, tk.LeaseOwner, tk.State)
	}
}

func TestWorkerReconnectsAfterAgentRestart(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	first := c.agents[0]
	w := startWorker(t, c, "wr") // connects to n1 first
	id := submit(t, cl, workflow(t, "etl.yaml"))
	if r := waitRun(t, cl, id, 20*time.Second); r.State != domain.RunSucceeded {
		t.Fatalf("before restart: %s", r.State)
	}
	c.kill9(first)
	leader := c.waitLeader(first)
	others := c.client(leader)
	id2 := submit(t, others, workflow(t, "etl.yaml"))
	if r := waitRun(t, others, id2, 30*time.Second); r.State != domain.RunSucceeded {
		t.Fatalf("after the worker's agent died: %s", r.State)
	}
	if tk := task(t, others, id2+"/load"); len(tk.Attempts) == 0 || tk.Attempts[len(tk.Attempts)-1].Worker != "wr" {
		t.Fatalf("load was not run by the reconnected worker: %+v", tk.Attempts)
	}
	select {
	case err := <-w.exited:
		t.Fatalf("the worker exited when its agent died: %v", err)
	default:
	}
	c.restart(first)
	id3 := submit(t, cl, workflow(t, "flaky.yaml"))
	if r := waitRun(t, cl, id3, 30*time.Second); r.State != domain.RunSucceeded {
		t.Fatalf("after restart: %s", r.State)
	}
}

func TestHandlerPanicFailsTaskWorkerLivesOn(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	startWorker(t, c, "wp")
	id := submit(t, cl, json.RawMessage(`{"tasks":[{"key":"boom","type":"panic","retry":{"max_attempts":1}}]}`))
	r := waitRun(t, cl, id, 20*time.Second)
	tk := task(t, cl, id+"/boom")
	if r.State != domain.RunFailed || !strings.Contains(tk.Error, "handler panic: example handler panic") {
		t.Fatalf("run %s error %q", r.State, tk.Error)
	}
	id2 := submit(t, cl, workflow(t, "etl.yaml"))
	if r := waitRun(t, cl, id2, 20*time.Second); r.State != domain.RunSucceeded {
		t.Fatalf("worker stopped serving after a panic: %s", r.State)
	}
}

// Every example workflow reaches its documented end state with the example
// worker, and the two scripts submit and wait over the raw protocol.
func TestExamples(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNewest() // decide.yaml uses version 2
	cl := c.client()
	w := startWorker(t, c, "wx")
	result := func(id, key string) map[string]any {
		var m map[string]any
		_ = json.Unmarshal(task(t, cl, id+"/"+key).Result, &m)
		return m
	}
	id := submit(t, cl, workflow(t, "etl.yaml"))
	if r := waitRun(t, cl, id, 20*time.Second); r.State != domain.RunSucceeded || result(id, "load")["total"] != 42.0 {
		t.Fatalf("etl: %s %v", r.State, result(id, "load"))
	}
	id = submit(t, cl, workflow(t, "fanout.yaml"))
	if r := waitRun(t, cl, id, 30*time.Second); r.State != domain.RunSucceeded || result(id, "join")["count"] != 20.0 {
		t.Fatalf("fanout: %s %v", r.State, result(id, "join"))
	}
	id = submit(t, cl, workflow(t, "flaky.yaml"))
	if r := waitRun(t, cl, id, 20*time.Second); r.State != domain.RunSucceeded || task(t, cl, id+"/call-api").Attempt != 3 {
		t.Fatalf("flaky: %s", r.State)
	}
	id = submit(t, cl, workflow(t, "decide.yaml"))
	if r := waitRun(t, cl, id, 30*time.Second); r.State != domain.RunFailed || task(t, cl, id+"/page-oncall").State != domain.TaskSucceeded ||
		task(t, cl, id+"/announce").State != domain.TaskSkipped {
		t.Fatalf("decide: %s", r.State)
	}
	if _, err := defrpc.Put(t.Context(), cl, defrpc.PutParams{Workflow: workflow(t, "etl.yaml")}); err != nil {
		t.Fatal(err)
	}
	id = submit(t, cl, workflow(t, "child.yaml"))
	if r := waitRun(t, cl, id, 30*time.Second); r.State != domain.RunSucceeded {
		t.Fatalf("child: %s", r.State)
	}
	id = submit(t, cl, workflow(t, "child-inline.yaml"))
	if r := waitRun(t, cl, id, 30*time.Second); r.State != domain.RunSucceeded {
		t.Fatalf("child-inline: %s", r.State)
	}
	id = submit(t, cl, workflow(t, "foreach.yaml"))
	if r := waitRun(t, cl, id, 60*time.Second); r.State != domain.RunSucceeded || result(id, "total")["count"] != 20.0 {
		t.Fatalf("foreach: %s %v", r.State, result(id, "total"))
	}
	id = submit(t, cl, workflow(t, "sleep.yaml"))
	if r := waitRun(t, cl, id, 30*time.Second); r.State != domain.RunSucceeded || task(t, cl, id+"/cool-down").Attempts != nil {
		t.Fatalf("sleep: %s", r.State)
	}
	id = submit(t, cl, workflow(t, "retry.yaml"))
	if r := waitRun(t, cl, id, 30*time.Second); r.State != domain.RunFailed {
		t.Fatalf("retry: %s before the retry", r.State)
	}
	if _, err := cl.RunRetry(t.Context(), rpc.RetryParams{ID: id}); err != nil {
		t.Fatal(err)
	}
	if r := waitRun(t, cl, id, 30*time.Second); r.State != domain.RunSucceeded {
		t.Fatalf("retry: %s after the retry", r.State)
	}
	id = submit(t, cl, workflow(t, "saga.yaml"))
	if r := waitRun(t, cl, id, 30*time.Second); r.State != domain.RunReverted {
		t.Fatalf("saga: %s", r.State)
	}
	var reverts []string
	for _, l := range w.lines() {
		if strings.HasPrefix(l, "call ") && strings.HasSuffix(l, " revert") {
			reverts = append(reverts, l)
		}
	}
	if strings.Join(reverts, "|") != "call refund charge-card revert|call release reserve-hotel revert" {
		t.Fatalf("compensations out of reverse dependency order: %v", reverts)
	}
	id = submit(t, cl, workflow(t, "finally.yaml"))
	if r := waitRun(t, cl, id, 30*time.Second); r.State != domain.RunReverted || task(t, cl, id+"/report").State != domain.TaskSucceeded {
		t.Fatalf("finally: %s", r.State)
	}
	id = submit(t, cl, workflow(t, "long.yaml"))
	if r := waitRun(t, cl, id, 30*time.Second); r.State != domain.RunSucceeded || task(t, cl, id+"/crunch").Attempt != 1 {
		t.Fatalf("long: %s", r.State)
	}
	hello := filepath.Join(repoRoot(), "examples", "workflows", "hello.json")
	for _, script := range []string{"submit.sh", "submit.py"} {
		out, err := exec.Command(filepath.Join(repoRoot(), "examples", "scripts", script), c.agents[1].sock, hello).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "succeeded") {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
}
