package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

func freePort(t testing.TB) int { return testutil.Port(t) }

// startAgents starts n in-process agents on loopback with real raft over
// TCP, real badger, and their Unix sockets.
func startAgents(t testing.TB, n int) []*Agent { return startAgentsLogging(t, n, nil) }

// startAgentsLogging is startAgents with each agent's logger from logger
// (nil: the agents' own, at warn).
func startAgentsLogging(t testing.TB, n int, logger func(i int) *slog.Logger) []*Agent {
	t.Helper()
	dir := t.TempDir()
	var peers []string
	var cfgs []Config
	for i := 1; i <= n; i++ {
		raftAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		peers = append(peers, fmt.Sprintf("n%d=%s", i, raftAddr))
		cfgs = append(cfgs, Config{NodeID: fmt.Sprintf("n%d", i), DataDir: filepath.Join(dir, fmt.Sprintf("n%d", i)),
			RaftAddr: raftAddr, ForwardAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			Socket: filepath.Join(dir, fmt.Sprintf("n%d.sock", i)), HeartbeatTimeout: 300 * time.Millisecond,
			ElectionTimeout: 300 * time.Millisecond, LogLevel: "warn"})
	}
	var agents []*Agent
	for i, c := range cfgs {
		c.Peers = strings.Join(peers, ",")
		var l *slog.Logger
		if logger != nil {
			l = logger(i)
		}
		a, err := New(withRaft(c), l)
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
		t.Cleanup(func() { _ = a.Shutdown() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := raftNode(agents[0]).WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	waitFresh(t, ctx, agents)
	return agents
}

func client(t testing.TB, a *Agent) *rpc.Client {
	t.Helper()
	c, err := rpc.NewClient([]string{"unix://" + a.cfg.Socket}, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func followers(agents []*Agent) (leader *Agent, fs []*Agent) {
	for _, a := range agents {
		if a.node.IsLeader() {
			leader = a
		} else {
			fs = append(fs, a)
		}
	}
	return
}

func TestSubmitClaimCompleteThroughFollowers(t *testing.T) {
	agents := startAgents(t, 3)
	_, fs := followers(agents)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c1, c2 := client(t, fs[0]), client(t, fs[len(fs)-1])
	res, err := c1.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"name":"pair","tasks":[{"key":"a","type":"echo"},{"key":"b","type":"echo","deps":["a"]}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		tasks, err := c2.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "w", WaitMS: 5000})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("claim: %v %v", tasks, err)
		}
		ack, err := c2.TaskComplete(ctx, rpc.CompleteParams{TaskID: tasks[0].TaskID, FencingToken: tasks[0].FencingToken, Result: json.RawMessage(`{"ok":true}`)})
		if err != nil || !ack.Accepted {
			t.Fatalf("complete: %v %v", ack, err)
		}
	}
	w, err := c1.RunWait(ctx, res.ID, 5000)
	if err != nil || !w.Done || w.Run.State != domain.RunSucceeded {
		t.Fatalf("wait: %+v %v", w, err)
	}
	// A follower forwards a submit unparsed; the leader's validation
	// answer comes back whole (code, problems with code and path).
	_, err = c1.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t","deps":["b"]},{"key":"b","type":"t","deps":["a"]}]}`)})
	var se *domain.SpecError
	if !errors.As(err, &se) || len(se.Problems) != 1 || se.Problems[0].Code != "cycle" || se.Problems[0].Path != "tasks[0].deps" {
		t.Fatalf("cyclic spec through a follower: %v (%#v)", err, se)
	}
	// Every node reports the same final state: each applies up to the
	// leader's last index, then all digests agree.
	leader, _ := followers(agents)
	target := leader.state.AppliedIndex()
	var first string
	for _, a := range agents {
		if err := a.node.WaitForApplied(ctx, target); err != nil {
			t.Fatal(err)
		}
		d, idx, err := a.state.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if idx != target {
			t.Fatalf("%s at index %d, leader at %d (an entry arrived meanwhile?)", a.cfg.NodeID, idx, target)
		}
		if first == "" {
			first = d
		} else if d != first {
			t.Fatalf("%s diverged at index %d", a.cfg.NodeID, idx)
		}
	}
}

func TestHTTPHealthAndMetrics(t *testing.T) {
	dir := t.TempDir()
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	raftAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	a, err := New(withRaft(Config{NodeID: "h1", DataDir: filepath.Join(dir, "h1"), RaftAddr: raftAddr,
		ForwardAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), Socket: filepath.Join(dir, "h1.sock"),
		HTTPAddr: httpAddr, HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LogLevel: "error"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := raftNode(a).WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	// A proposal makes raft emit its commit metrics.
	if _, err := client(t, a).RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t"}]}`)}); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	if code, body := get("/readyz"); code != 200 {
		t.Fatalf("readyz %d %s", code, body)
	}
	code, body := get("/metrics")
	if code != 200 {
		t.Fatalf("metrics %d: %.300s", code, body)
	}
	for _, want := range []string{"flowd_cluster_state", "flowd_runs{state=\"running\"} 1", "flowd_rpc_requests_total", "flowd_raft_commit_time_seconds_bucket", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Fatalf("metrics lack %q", want)
		}
	}
}

// Everything flowd exports follows Prometheus' conventions: snake_case
// names, counters ending in _total, help text that says more than the
// name, no summaries (raft's timings were summaries with NaN quantiles),
// no go-metrics runtime duplicates of the Go collector.
func TestMetricsFollowPrometheusNaming(t *testing.T) {
	dir := t.TempDir()
	a, err := New(withRaft(Config{NodeID: "m1", DataDir: filepath.Join(dir, "m1"), RaftAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		ForwardAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), Socket: filepath.Join(dir, "m1.sock"),
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LogLevel: "error"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := raftNode(a).WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	// Commits make raft and raft-boltdb report their timings, sizes and counts.
	for range 3 {
		if _, err := client(t, a).RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t"}]}`)}); err != nil {
			t.Fatal(err)
		}
	}
	fams, err := a.gatherers().Gather()
	if err != nil {
		t.Fatal(err)
	}
	valid := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	raft := 0
	for _, f := range fams {
		name := f.GetName()
		if !strings.HasPrefix(name, "flowd_") {
			continue
		}
		if strings.HasPrefix(name, "flowd_raft_") {
			raft++
		}
		switch {
		case !valid.MatchString(name):
			t.Errorf("%s: not snake_case", name)
		case f.GetHelp() == "" || f.GetHelp() == name:
			t.Errorf("%s: help text %q says nothing", name, f.GetHelp())
		case f.GetType() == dto.MetricType_SUMMARY:
			t.Errorf("%s: a summary (use a histogram)", name)
		case f.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total"):
			t.Errorf("%s: a counter not ending in _total", name)
		case strings.Contains(name, "runtime"):
			t.Errorf("%s: duplicates the Go collector", name)
		}
	}
	if raft < 5 {
		t.Fatalf("%d raft metrics exported, want raft's commit, append and bolt metrics", raft)
	}
}

// A long-poll claim forwarded from a follower is held at the leader on a
// connection of its own; when the worker goes away the leader stops holding
// it, so no task is leased to the departed worker.
func TestAbandonedForwardedClaimIsDropped(t *testing.T) {
	agents := startAgents(t, 3)
	leader, fs := followers(agents)
	conn, err := net.Dial("unix", fs[0].cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"task.claim","params":{"worker_id":"ghost","wait_ms":30000}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyTrue(t, 5*time.Second, 10*time.Millisecond, "the leader holds the forwarded claim", func() bool { return leader.node.WaitingClaims() == 1 })
	conn.Close()
	testutil.EventuallyTrue(t, 5*time.Second, 10*time.Millisecond, "the leader drops the abandoned claim", func() bool { return leader.node.WaitingClaims() == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := client(t, leader)
	if _, err := c.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t"}]}`)}); err != nil {
		t.Fatal(err)
	}
	got, err := c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "real", WaitMS: 3000})
	if err != nil || len(got) != 1 || got[0].Attempt != 1 {
		t.Fatalf("claim after the ghost left: %+v %v", got, err)
	}
}

// task.complete with a claim, sent through a follower: the result and the
// next lease come back in one answer; a claim that asks to wait is refused
// with a hint, before anything is proposed.
func TestCompleteWithClaimThroughFollower(t *testing.T) {
	agents := startAgents(t, 3)
	_, fs := followers(agents)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := client(t, fs[0])
	if _, err := c.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t"}]}`)}); err != nil {
		t.Fatal(err)
	}
	first, err := c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "w", Types: []string{"t"}, WaitMS: 5000})
	if err != nil || len(first) != 1 {
		t.Fatalf("claim: %v %v", first, err)
	}
	_, err = c.TaskCompleteAndClaim(ctx, rpc.CompleteParams{TaskID: first[0].TaskID, FencingToken: first[0].FencingToken,
		Claim: &rpc.ClaimParams{WorkerID: "w", Max: 1, WaitMS: 10}})
	var re *rpc.Error
	if !errors.As(err, &re) || re.Code != rpc.CodeInvalidParams || !strings.Contains(re.Message, "task.claim") {
		t.Fatalf("claim with wait_ms: %v", err)
	}
	ack, err := c.TaskCompleteAndClaim(ctx, rpc.CompleteParams{TaskID: first[0].TaskID, FencingToken: first[0].FencingToken,
		Result: json.RawMessage(`1`), Claim: &rpc.ClaimParams{WorkerID: "w", Types: []string{"t"}, Max: 4}})
	if err != nil || !ack.Accepted || len(ack.Tasks) != 1 || ack.Tasks[0].TaskID == first[0].TaskID {
		t.Fatalf("complete with claim: %+v %v", ack, err)
	}
	if ack.Tasks[0].FencingToken != ack.Index {
		t.Fatalf("next task's token %d, want the completion's entry %d", ack.Tasks[0].FencingToken, ack.Index)
	}
	done, err := c.TaskComplete(ctx, rpc.CompleteParams{TaskID: ack.Tasks[0].TaskID, FencingToken: ack.Tasks[0].FencingToken})
	if err != nil || !done.Accepted {
		t.Fatalf("complete the claimed task: %+v %v", done, err)
	}
}

// Read-your-writes on one agent, across connections: a follower answers a
// forwarded write as soon as the leader does, and a read on another
// connection to that follower right after it still sees the write (the
// read waits for the agent's read fence).
func TestReadFenceAcrossConnections(t *testing.T) {
	agents := startAgents(t, 3)
	_, fs := followers(agents)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	writer := client(t, fs[0])
	for i := range 20 {
		res, err := writer.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t"}]}`)})
		if err != nil {
			t.Fatal(err)
		}
		reader := client(t, fs[0]) // a new connection each time
		r, err := reader.RunGet(ctx, res.ID)
		if err != nil || r.ID != res.ID {
			t.Fatalf("submit %d: read on another connection to the same follower: %+v %v", i, r, err)
		}
		reader.Close()
	}
}
