package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/worker"
)

const wfLogs = `name: logs
tasks:
  - key: sdk
    type: logsdk
    retry: {max_attempts: 2, initial_backoff_ms: 1}
  - key: sh
    type: logsh
  - key: live
    type: loglive
`

// TestTaskLogsEndToEnd: a handler's lines (Log, Logf, Logger) written by
// the SDK and an exec command's stdout and stderr on success reach
// `flowd task logs` per attempt; --follow shows a running task's lines as
// they come and ends with the task; a stale attempt's logs are rejected.
func TestTaskLogsEndToEnd(t *testing.T) {
	tc := startCluster(t)
	w, err := worker.New(tc.eps, worker.Options{ID: "logger", Concurrency: 4, LogFlush: 50 * time.Millisecond, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	w.Register("logsdk", func(_ context.Context, task *worker.Task) (any, error) {
		task.Log("hello from attempt", task.Attempt)
		task.Logger().Info("structured", "n", 7)
		if task.Attempt == 1 {
			return nil, errors.New("first attempt fails")
		}
		task.Logf("multi\nline %d", 2)
		return "ok", nil
	})
	w.Register("logsh", execHandler(`echo err-line >&2; echo '{"ok":true}'`, 0))
	w.Register("loglive", func(ctx context.Context, task *worker.Task) (any, error) {
		task.Log("waiting for release")
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		task.Log("released")
		return nil, nil
	})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })

	id := tc.submitID(t, writeFile(t, "logs.yaml", wfLogs))
	s := shortID(id)

	// Follow the live task: its first line arrives while it runs.
	stdout, stderr := newSignalWriter("waiting for release"), newSignalWriter("")
	fctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	codec := make(chan int, 1)
	go func() {
		codec <- run(fctx, []string{"flowd", "--addr", tc.addr, "task", "logs", s, "live", "--follow"}, nil, stdout, stderr)
	}()
	waitFor(t, stdout.found, "the running task's first line", stdout)
	close(release)
	select {
	case code := <-codec:
		if code != 0 || !strings.Contains(stdout.String(), "released") {
			t.Fatalf("follow exit %d\n%s\n%s", code, stdout.String(), stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("--follow did not end with the task:\n%s", stdout.String())
	}

	c := tc.client(t)
	if res, err := c.RunWait(t.Context(), id, 20000); err != nil || !res.Done {
		t.Fatalf("wait: %+v %v", res, err)
	}
	tc.sync(t)

	out := tc.must(t, 0, "task", "logs", s+"/sdk").out
	for _, want := range []string{"== attempt 1 · worker logger · failed ==", "log    hello from attempt 1",
		`level=INFO msg=structured n=7`, "== attempt 2 · worker logger · succeeded ==", "log    multi", "log    line 2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("task logs sdk: missing %q in\n%s", want, out)
		}
	}
	if two := tc.must(t, 0, "task", "logs", s, "sdk", "--attempt", "2").out; strings.Contains(two, "attempt 1") || !strings.Contains(two, "hello from attempt 2") {
		t.Fatalf("--attempt 2:\n%s", two)
	}
	sh := tc.must(t, 0, "task", "logs", s, "sh").out
	if !strings.Contains(sh, `stdout {"ok":true}`) || !strings.Contains(sh, "stderr err-line") {
		t.Fatalf("exec worker's output on success:\n%s", sh)
	}
	// JSON: one object per line.
	js := tc.must(t, 0, "task", "logs", s, "sh", "-o", "json").out
	var l struct {
		Attempt int    `json:"attempt"`
		Stream  string `json:"stream"`
		Line    string `json:"line"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(js, "\n", 2)[0]), &l); err != nil || l.Attempt != 1 || l.Line == "" {
		t.Fatalf("json line %q: %+v %v", js, l, err)
	}
	if r := tc.must(t, 1, "task", "logs", s, "sdk", "--attempt", "5"); !strings.Contains(r.err, "has no attempt 5") {
		t.Fatalf("unknown attempt:\n%s", r)
	}

	// A stale attempt's logs are rejected with its heartbeat.
	task, err := c.TaskGet(t.Context(), id+"/sdk")
	if err != nil {
		t.Fatal(err)
	}
	ack, err := c.TaskHeartbeatWith(t.Context(), rpc.HeartbeatParams{TaskID: id + "/sdk", FencingToken: task.Attempts[0].FencingToken,
		LogParams: rpc.LogParams{Logs: []rpc.LogLine{{Stream: "log", Line: "stale line"}}}})
	if err != nil || ack.Accepted {
		t.Fatalf("stale heartbeat: %+v %v", ack, err)
	}
	res, err := c.TaskLogs(t.Context(), rpc.TaskLogsParams{Run: s, Key: "sdk"})
	if err != nil || !res.Done || len(res.Attempts) != 2 {
		t.Fatalf("task.logs: %+v %v", res, err)
	}
	for _, a := range res.Attempts {
		for _, line := range a.Lines {
			if line.Line == "stale line" {
				t.Fatal("a stale attempt's line was stored")
			}
		}
	}
}
