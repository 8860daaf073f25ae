package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/flowd/flowd/internal/testing/testutil"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/daemon"
	"github.com/flowd/flowd/internal/testing/testagents"
	"github.com/flowd/flowd/rpc"
)

// testCluster is three in-process agents on loopback (real raft over TCP,
// real badger, Unix sockets) and the --addr that reaches them.
type testCluster struct {
	agents []*daemon.Agent
	stops  []func()
	eps    []string
	addr   string
	dir    string
}

func freePort(t testing.TB) int { return testutil.Port(t) }

func startCluster(t testing.TB) *testCluster {
	t.Helper()
	ac := testagents.Start(t, 3, discardLogger)
	tc := &testCluster{agents: ac.Agents, stops: ac.Stops, eps: ac.Eps, addr: strings.Join(ac.Eps, ","), dir: ac.Dir}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// Open every follower's forwarding connection to the leader with one
	// forwarded call each, before concurrent calls can race to dial it: a
	// race there fails a call with -32603 "rpc: connection closed" (see the
	// report on daemon/forward.go).
	for _, ep := range tc.eps {
		c, err := rpc.NewClient([]string{ep}, rpc.ClientOptions{Logger: discardLogger})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.WorkersList(ctx); err != nil {
			t.Fatalf("warm up %s: %v", ep, err)
		}
		c.Close()
	}
	return tc
}

// result of one in-process run of the app.
type result struct {
	code     int
	out, err string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.out, r.err)
}

// flowd runs the app against the cluster.
func (tc *testCluster) flowd(t testing.TB, args ...string) result {
	t.Helper()
	return tc.flowdIn(t, nil, args...)
}

func (tc *testCluster) flowdIn(t testing.TB, stdin io.Reader, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	all := append([]string{"flowd", "--addr", tc.addr}, args...)
	code := run(t.Context(), all, stdin, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// must runs and requires exit code want.
func (tc *testCluster) must(t testing.TB, want int, args ...string) result {
	t.Helper()
	r := tc.flowd(t, args...)
	if r.code != want {
		t.Fatalf("flowd %s: want exit %d\n%s", strings.Join(args, " "), want, r)
	}
	return r
}

func (tc *testCluster) client(t testing.TB) *rpc.Client {
	t.Helper()
	c, err := rpc.NewClient(tc.eps, rpc.ClientOptions{Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// startWorker runs a tiny worker: it claims tasks of the given types and
// completes them (echo, undo: the input as result) or fails them (fail:
// not retryable). It stops when the test ends.
func (tc *testCluster) startWorker(t testing.TB, types ...string) {
	t.Helper()
	c := tc.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			tasks, err := c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "test-worker", Types: types, Max: 8, WaitMS: 2000})
			if err != nil {
				continue // the client backs off and fails over itself
			}
			for _, task := range tasks {
				if task.Type == "fail" {
					no := false
					_, _ = c.TaskFail(ctx, rpc.FailParams{TaskID: task.TaskID, FencingToken: task.FencingToken, Error: "boom: " + task.TaskKey, Retryable: &no})
					continue
				}
				res := task.Input
				if len(res) == 0 {
					res = json.RawMessage(`{"ok":true}`)
				}
				_, _ = c.TaskComplete(ctx, rpc.CompleteParams{TaskID: task.TaskID, FencingToken: task.FencingToken, Result: res})
			}
		}
	}()
}

// completeOne claims one task of type typ (as another worker) and
// completes it.
func (tc *testCluster) completeOne(t testing.TB, typ string) rpc.Claimed {
	t.Helper()
	c := tc.client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		tasks, err := c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "manual-worker", Types: []string{typ}, Max: 1, WaitMS: 5000})
		if err != nil {
			t.Fatalf("claim %s: %v", typ, err)
		}
		if len(tasks) == 0 {
			continue
		}
		ack, err := c.TaskComplete(ctx, rpc.CompleteParams{TaskID: tasks[0].TaskID, FencingToken: tasks[0].FencingToken, Result: json.RawMessage(`"done"`)})
		if err != nil || !ack.Accepted {
			t.Fatalf("complete: %v %v", ack, err)
		}
		return tasks[0]
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// submitID submits a workflow (no wait) with --output json and returns the
// run id.
func (tc *testCluster) submitID(t testing.TB, file string, args ...string) string {
	t.Helper()
	r := tc.must(t, 0, append(append([]string{"submit", file}, args...), "--output", "json")...)
	var v struct {
		ID      string `json:"id"`
		ShortID string `json:"short_id"`
		Created bool   `json:"created"`
		Index   uint64 `json:"index"`
	}
	if err := json.Unmarshal([]byte(r.out), &v); err != nil || v.ID == "" || !v.Created || !strings.HasSuffix(v.ID, v.ShortID) || v.Index == 0 {
		t.Fatalf("submit output %q: %v", r.out, err)
	}
	tc.waitApplied(t, v.Index)
	return v.ID
}

// sync waits until every agent has applied what the leader has: a read
// after a write then sees the write whichever agent serves it.
func (tc *testCluster) sync(t testing.TB) {
	t.Helper()
	var idx uint64
	for _, a := range tc.agents {
		if a.Node().IsLeader() {
			idx = a.Node().FSM().AppliedIndex()
		}
	}
	tc.waitApplied(t, idx)
}

// waitApplied waits until every agent has applied index. Agents that follow
// resolve run ids from their own state, and a write forwarded to the leader
// returns before the follower has applied it (see the report on
// daemon.onLeader), so a test that acts on a run right after creating it
// waits for that first.
func (tc *testCluster) waitApplied(t testing.TB, index uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, a := range tc.agents {
		if err := a.Node().WaitForApplied(ctx, index); err != nil {
			t.Fatalf("wait for index %d: %v", index, err)
		}
	}
}

func getRun(t *testing.T, tc *testCluster, id string) rpc.Run {
	t.Helper()
	r := tc.must(t, 0, "run", "get", id, "-o", "json")
	var run rpc.Run
	if err := json.Unmarshal([]byte(r.out), &run); err != nil {
		t.Fatalf("run get json: %v\n%s", err, r.out)
	}
	return run
}

// signalWriter is a goroutine-safe buffer that closes found when its
// content first satisfies the expectation.
type signalWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	want  func(string) bool
	found chan struct{}
	done  bool
}

func newSignalWriter(want string) *signalWriter {
	w := &signalWriter{}
	w.expect(want)
	return w
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	w.check()
	return n, err
}

func (w *signalWriter) check() {
	if !w.done && w.want(w.buf.String()) {
		w.done = true
		close(w.found)
	}
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// expect re-arms found for a substring.
func (w *signalWriter) expect(want string) <-chan struct{} {
	return w.expectFunc(func(s string) bool { return strings.Contains(s, want) })
}

// expectLine re-arms found for a line containing every part.
func (w *signalWriter) expectLine(parts ...string) <-chan struct{} {
	return w.expectFunc(func(s string) bool {
	lines:
		for _, l := range strings.Split(s, "\n") {
			for _, p := range parts {
				if !strings.Contains(l, p) {
					continue lines
				}
			}
			return true
		}
		return false
	})
}

func (w *signalWriter) expectFunc(want func(string) bool) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.want, w.found, w.done = want, make(chan struct{}), false
	w.check()
	return w.found
}

func waitFor(t *testing.T, ch <-chan struct{}, what string, w *signalWriter) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s; output so far:\n%s", what, w.String())
	}
}
