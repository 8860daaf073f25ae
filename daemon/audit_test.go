package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/rpc"
)

// logBuffer collects a logger's lines (safe for concurrent writers); if
// wrote is set, every write signals it without blocking.
type logBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if b.wrote != nil {
		select {
		case b.wrote <- struct{}{}:
		default:
		}
	}
	return n, err
}

// lines returns the lines logged so far.
func (b *logBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.FieldsFunc(b.buf.String(), func(r rune) bool { return r == '\n' })
}

// audits returns the "audit" entries logged so far.
func (b *logBuffer) audits(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if e["msg"] == auditMsg {
			out = append(out, e)
		}
	}
	return out
}

// startLoggedAgents starts n agents like startAgents, each logging JSON at
// level into its own buffer.
func startLoggedAgents(t *testing.T, n int, level slog.Level) ([]*Agent, []*logBuffer) {
	t.Helper()
	logs := make([]*logBuffer, n)
	agents := startAgentsLogging(t, n, func(i int) *slog.Logger {
		logs[i] = &logBuffer{}
		return slog.New(slog.NewJSONHandler(logs[i], &slog.HandlerOptions{Level: level}))
	})
	return agents, logs
}

func num(v any) int { f, _ := v.(float64); return int(f) }

// Every admin call is logged once, after its answer, with the caller's
// uid/gid/pid, the socket, the method, its key params (no payloads) and
// the outcome; reads and worker calls are not.
func TestAuditLogsAdminCalls(t *testing.T) {
	agents, logs := startLoggedAgents(t, 1, slog.LevelInfo)
	a, lb := agents[0], logs[0]
	c := client(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := func(method string, params any, wantErr bool) {
		t.Helper()
		var out json.RawMessage
		err := c.Call(ctx, method, params, &out)
		if (err != nil) != wantErr {
			t.Fatalf("%s: err = %v, want error %v", method, err, wantErr)
		}
	}

	// Reads and worker calls: not audited.
	call(rpc.MethodClusterStatus, nil, false)
	call(rpc.MethodSettingsGet, nil, false)
	call(rpc.MethodQueueList, nil, false)
	call(rpc.MethodRaftPeers, nil, false)
	call(rpc.MethodTaskClaim, rpc.ClaimParams{WorkerID: "w1", Types: []string{"nothing"}}, false)
	call(rpc.MethodTaskHeartbeat, map[string]any{"task_id": "0192", "token": 1}, true)
	// run.submit is audited at debug level only: not in an info log.
	call(rpc.MethodRunSubmit, map[string]any{"workflow": map[string]any{"name": "w",
		"tasks": []any{map[string]any{"key": "a", "type": "echo"}}}, "input": map[string]any{"secret": "payload"}}, false)
	if got := lb.audits(t); len(got) != 0 {
		t.Fatalf("reads, worker calls and submits were audited at info: %v", got)
	}

	// Admin calls: one entry each, in order.
	five := 5
	call(rpc.MethodSettingsSet, rpc.Settings{MaxRunningRuns: &five}, false)
	call(rpc.MethodQueueSet, rpc.QueueSetParams{Name: "emails", Concurrency: 3}, false)
	call(rpc.MethodQueuePause, rpc.QueuePauseParams{Name: "emails"}, false)
	call(rpc.MethodQueueResume, rpc.QueuePauseParams{Name: "emails"}, false)
	call(rpc.MethodSnapshotSave, rpc.SnapshotParams{Path: "s1"}, false)
	call(rpc.MethodSnapshotSave, rpc.SnapshotParams{Path: "../x"}, true)
	call(rpc.MethodRaftRemovePeer, rpc.PeerParams{ID: "n9"}, true)
	call(rpc.MethodRunCancel, rpc.VerbParams{ID: "nope", Reason: strings.Repeat("r", 500)}, true)

	type want struct {
		method  string
		params  map[string]any
		outcome string
		code    int
	}
	wants := []want{
		{rpc.MethodSettingsSet, map[string]any{"max_running_runs": 5.0}, "ok", 0},
		{rpc.MethodQueueSet, map[string]any{"name": "emails", "concurrency": 3.0}, "ok", 0},
		{rpc.MethodQueuePause, map[string]any{"name": "emails"}, "ok", 0},
		{rpc.MethodQueueResume, map[string]any{"name": "emails"}, "ok", 0},
		{rpc.MethodSnapshotSave, map[string]any{"path": "s1"}, "ok", 0},
		{rpc.MethodSnapshotSave, map[string]any{"path": "../x"}, "error", rpc.CodeInvalidParams},
		{rpc.MethodRaftRemovePeer, map[string]any{"id": "n9"}, "error", 0},
		{rpc.MethodRunCancel, map[string]any{"id": "nope"}, "error", 0},
	}
	got := lb.audits(t)
	if len(got) != len(wants) {
		t.Fatalf("%d audit entries, want %d: %v", len(got), len(wants), got)
	}
	for i, w := range wants {
		e := got[i]
		if e["level"] != "INFO" || e["method"] != w.method || e["outcome"] != w.outcome {
			t.Fatalf("entry %d = %v, want %s %s", i, e, w.method, w.outcome)
		}
		if num(e["uid"]) != os.Getuid() || num(e["gid"]) != os.Getgid() || num(e["pid"]) != os.Getpid() {
			t.Fatalf("entry %d names the wrong caller: %v", i, e)
		}
		if e["listener"] != "unix:"+a.cfg.Socket || e["roles"] == nil || e["member"] != nil || e["forwarded"] != nil {
			t.Fatalf("entry %d: where from: %v", i, e)
		}
		ps, _ := e["params"].(map[string]any)
		for k, v := range w.params {
			if ps[k] != v {
				t.Fatalf("entry %d: params %v, want %s=%v", i, ps, k, v)
			}
		}
		if w.outcome == "error" && (num(e["code"]) >= 0 || e["error"] == nil) {
			t.Fatalf("entry %d: no error code: %v", i, e)
		}
		if w.code != 0 && num(e["code"]) != w.code {
			t.Fatalf("entry %d: code %v, want %d", i, e["code"], w.code)
		}
	}
	// Long strings are cut.
	if r, _ := got[7]["params"].(map[string]any)["reason"].(string); len(r) > auditMaxString+4 {
		t.Fatalf("reason logged in full (%d bytes)", len(r))
	}
}

// A call forwarded by a follower is audited by the follower with the
// client's uid and by the leader with the forwarding member.
func TestAuditForwardedCall(t *testing.T) {
	agents, logs := startLoggedAgents(t, 3, slog.LevelInfo)
	leader, fs := followers(agents)
	f := fs[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out json.RawMessage
	if err := client(t, f).Call(ctx, rpc.MethodQueueSet, rpc.QueueSetParams{Name: "q1", Concurrency: 2}, &out); err != nil {
		t.Fatal(err)
	}
	logOf := func(a *Agent) *logBuffer {
		for i := range agents {
			if agents[i] == a {
				return logs[i]
			}
		}
		return nil
	}
	fe := logOf(f).audits(t)
	if len(fe) != 1 || fe[0]["method"] != rpc.MethodQueueSet || num(fe[0]["uid"]) != os.Getuid() || fe[0]["outcome"] != "ok" {
		t.Fatalf("follower's audit: %v", fe)
	}
	le := logOf(leader).audits(t)
	if len(le) != 1 || le[0]["method"] != rpc.MethodQueueSet || le[0]["member"] == nil || le[0]["forwarded"] != true ||
		le[0]["uid"] != nil || le[0]["listener"] != "forward:"+leader.cfg.ForwardAddr || le[0]["outcome"] != "ok" {
		t.Fatalf("leader's audit: %v", le)
	}
	if ps, _ := le[0]["params"].(map[string]any); ps["name"] != "q1" {
		t.Fatalf("leader's audit params: %v", le[0])
	}
	// The forwarded call carries whom the follower served.
	if who, _ := le[0]["for"].(string); !strings.Contains(who, fmt.Sprintf("uid %d ", os.Getuid())) || le[0]["for_roles"] == nil {
		t.Fatalf("leader's audit does not name the original caller: %v", le[0])
	}
	for _, a := range fs[1:] {
		if e := logOf(a).audits(t); len(e) != 0 {
			t.Fatalf("an uninvolved agent audited: %v", e)
		}
	}
}

// Every admin-only method of the table is wrapped; no other is. A method
// added to the table without a role is audited without any change here.
func TestAuditCoversTheRoleTable(t *testing.T) {
	a := seamAgent("n1", nil, nil)
	var lb logBuffer
	a.log = slog.New(slog.NewJSONHandler(&lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := a.methodTable()
	m["brand.new"] = func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	wrapped := a.audited(m)
	auditPC := reflect.ValueOf(wrapped["brand.new"]).Pointer()
	admin := 0
	for name, h := range wrapped {
		isAudited := reflect.ValueOf(h).Pointer() == auditPC
		if isAudited != rpc.AdminOnly(name) {
			t.Errorf("%s: audited %v, admin-only %v", name, isAudited, rpc.AdminOnly(name))
		}
		if isAudited {
			admin++
		}
	}
	if admin < 16 { // run.* verbs, submit, replay, queue.*, settings.set, raft writes, snapshots, brand.new
		t.Fatalf("only %d methods audited", admin)
	}
	ctx := context.Background()
	_, _ = wrapped["brand.new"](ctx, json.RawMessage(`{"id":"x","input":{"a":1},"labels":{"k":"v"},"token":"s3cr3t","n":7,"dry":true}`))
	e := lb.audits(t)
	if len(e) != 1 || e[0]["method"] != "brand.new" || e[0]["caller"] != "internal" || e[0]["level"] != "INFO" || e[0]["outcome"] != "ok" {
		t.Fatalf("%v", e)
	}
	ps := e[0]["params"].(map[string]any)
	if ps["id"] != "x" || ps["input"] != nil || ps["labels"] != nil || ps["token"] != "[redacted]" || ps["n"] != 7.0 || ps["dry"] != true {
		t.Fatalf("params %v", ps)
	}
	// run.submit: at debug level.
	sub := a.audited(map[string]rpc.Handler{rpc.MethodRunSubmit: func(context.Context, json.RawMessage) (any, error) { return nil, nil }})
	_, _ = sub[rpc.MethodRunSubmit](ctx, json.RawMessage(`{"id":"r1","workflow":{"name":"w"}}`))
	if e := lb.audits(t); len(e) != 2 || e[1]["level"] != "DEBUG" || e[1]["params"].(map[string]any)["workflow"] != nil {
		t.Fatalf("%v", e)
	}
}
