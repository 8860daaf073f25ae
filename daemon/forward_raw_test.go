package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/rpc/defrpc"
	"github.com/flowd/flowd/rpc/schedrpc"
)

// recordingLeader serves a leader's forwarding port that records each
// envelope as it arrived and answers with answer.
func recordingLeader(t testing.TB, answer func(env forwardEnvelope[json.RawMessage]) (any, error)) (string, <-chan json.RawMessage) {
	t.Helper()
	got := make(chan json.RawMessage, 8)
	srv := rpc.NewServer(map[string]rpc.Handler{methodForward: func(ctx context.Context, raw json.RawMessage) (any, error) {
		got <- append(json.RawMessage(nil), raw...)
		var env forwardEnvelope[json.RawMessage]
		if err := json.Unmarshal(raw, &env); err != nil {
			return nil, err
		}
		return answer(env)
	}}, rpc.Options{Logger: slog.New(slog.DiscardHandler)})
	return serveTCP(t, srv), got
}

// serveTCP serves srv on a loopback port until the test ends.
func serveTCP(t testing.TB, srv *rpc.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Serve(ctx, ln)
	t.Cleanup(func() { cancel(); srv.Close() })
	return ln.Addr().String()
}

// serveClient serves h as method on a client socket of its own and dials it.
func serveClient(t testing.TB, method string, h rpc.Handler) *rpc.Conn {
	t.Helper()
	srv := rpc.NewServer(map[string]rpc.Handler{method: h}, rpc.Options{Logger: slog.New(slog.DiscardHandler)})
	c, err := rpc.Dial(context.Background(), "tcp://"+serveTCP(t, srv), rpc.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A call a follower forwards reaches the leader with its params as the
// client sent them, and the client gets the leader's answer as the leader
// wrote it: a member the follower's result type does not know (a newer
// leader's) survives, nothing is reordered, the read fence is raised from
// the answer, the caller's deadline and roles travel in the envelope, and
// an error keeps its code, message and data.
func TestRelayedForwardPassesBytesThrough(t *testing.T) {
	answer := json.RawMessage(`{"accepted":true,"lease_expires_at":"2026-12-05T03:00:00Z","index":42,"from_a_newer_leader":{"x":[1,2]}}`)
	fail := &rpc.Error{Code: rpc.CodeIllegalTransition, Message: "the lease moved on", Data: json.RawMessage(`{"state":"done","token":9}`)}
	addr, got := recordingLeader(t, func(env forwardEnvelope[json.RawMessage]) (any, error) {
		if env.Method != rpc.MethodTaskHeartbeat || env.DeadlineMS == 0 {
			return nil, rpc.Errorf(rpc.CodeInvalidParams, "envelope %+v: want a heartbeat with its deadline", env)
		}
		if string(env.Params) == `{"fencing_token":9, "task_id":"r/b"}` {
			return nil, fail
		}
		return rpc.RawResult(answer), nil
	})
	node := newFakeLeadership(addr)
	a := &Agent{proxy: newLeaderProxy("n2", node, nil, slog.New(slog.DiscardHandler))}
	conn := serveClient(t, rpc.MethodTaskHeartbeat, a.relaying(rpc.MethodTaskHeartbeat, rpc.Func(a.taskHeartbeat)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Members out of the typed struct's order, with spacing: encoded again,
	// they would read {"task_id":"r/a","fencing_token":7}.
	sent := json.RawMessage(`{"fencing_token":7,  "task_id":"r/a"}`)
	var res json.RawMessage
	if err := conn.Call(ctx, rpc.MethodTaskHeartbeat, sent, &res); err != nil {
		t.Fatal(err)
	}
	if string(res) != string(answer) {
		t.Fatalf("the client got %s, want the leader's answer %s as it was", res, answer)
	}
	var env forwardEnvelope[json.RawMessage]
	if err := json.Unmarshal(<-got, &env); err != nil {
		t.Fatal(err)
	}
	if string(env.Params) != string(sent) {
		t.Fatalf("the leader got params %s, want %s as the client sent them", env.Params, sent)
	}
	if env.For == nil || env.For.Roles == 0 {
		t.Fatalf("the envelope lost its caller: %+v", env.For)
	}
	if f := a.proxy.readFence.Load(); f != 42 {
		t.Fatalf("read fence %d after a forwarded write at 42", f)
	}

	err := conn.Call(ctx, rpc.MethodTaskHeartbeat, json.RawMessage(`{"fencing_token":9, "task_id":"r/b"}`), &res)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Code != fail.Code || re.Message != fail.Message || string(re.Data) != string(fail.Data) {
		t.Fatalf("the leader's error reached the client as %#v, want %#v", err, fail)
	}
	<-got
}

// The members a follower fills in (ids it picks before forwarding) are
// added to the bytes its client sent; bytes that cannot take one without a
// decoder seeing the member twice are refused (the params are then encoded
// again).
func TestSpliceMember(t *testing.T) {
	for _, tc := range []struct {
		raw, in, name, want string
	}{
		{`{}`, "", "request_id", `{"request_id":"v"}`},
		{`{ }`, "", "request_id", `{ "request_id":"v"}`},
		{`{"worker_id":"w","types":["a}"]}`, "", "request_id", `{"worker_id":"w","types":["a}"],"request_id":"v"}`},
		{`{"input":"q\"}","worker_id":"w"}`, "", "request_id", `{"input":"q\"}","worker_id":"w","request_id":"v"}`},
		{`{"task_id":"r/a","claim":{"worker_id":"w","max":1},"result":{"a":{}}}`, "claim", "request_id",
			`{"task_id":"r/a","claim":{"worker_id":"w","max":1,"request_id":"v"},"result":{"a":{}}}`},
		{`{"claim":{}}`, "claim", "request_id", `{"claim":{"request_id":"v"}}`},
		{`{"request_id":""}`, "", "request_id", ""},                // present (empty): not added twice
		{`{"Request_ID":""}`, "", "request_id", ""},                // another case: a decoder takes it for it
		{`{"requeſt_id":""}`, "", "request_id", ""},                // folds too
		{`{"request\u005fid":""}`, "", "request_id", ""},           // an escaped name
		{`{"claim":{"request_id":""}}`, "claim", "request_id", ""}, // present in the claim
		{`{"claim":null}`, "claim", "request_id", ""},
		{`{"task_id":"r/a"}`, "claim", "request_id", ""},
		{`[1]`, "", "request_id", ""},
	} {
		got, ok := spliceMember(json.RawMessage(tc.raw), tc.in, tc.name, "v")
		if ok != (tc.want != "") || ok && string(got) != tc.want {
			t.Errorf("spliceMember(%s, %q, %q) = %s, %v; want %q", tc.raw, tc.in, tc.name, got, ok, tc.want)
		}
		if ok && !json.Valid(got) {
			t.Errorf("spliceMember(%s) = %s: not JSON", tc.raw, got)
		}
	}
	if _, ok := spliceMember(json.RawMessage(`{}`), "", "id", `a"b`); ok {
		t.Error("a value that needs escaping was spliced")
	}
}

// writeIndexOf reads from an answer's bytes what WriteIndex reads from the
// decoded answer, for every result type that has WriteIndex.
func TestWriteIndexOfMatchesWriteIndex(t *testing.T) {
	check := func(t *testing.T, r interface{ WriteIndex() uint64 }, of func(json.RawMessage) uint64) {
		t.Helper()
		if r.WriteIndex() == 0 {
			t.Fatalf("%T: sample without an index", r)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := of(b); got != r.WriteIndex() {
			t.Errorf("%T: writeIndexOf = %d, WriteIndex = %d (%s)", r, got, r.WriteIndex(), b)
		}
	}
	withIndex := func(v any) {
		reflect.ValueOf(v).Elem().FieldByName("Index").SetUint(42)
	}
	ack, sub, chg, put, cr, fire, acl, sig := rpc.AckResult{}, rpc.SubmitResult{}, rpc.ChangedResult{}, defrpc.PutResult{},
		schedrpc.CreateResult{}, schedrpc.FireResult{}, rpc.ACLTokenCreateResult{}, rpc.SignalResult{}
	for _, v := range []any{&ack, &sub, &chg, &put, &cr, &fire, &acl, &sig} {
		withIndex(v)
	}
	check(t, ack, writeIndexOf[rpc.AckResult])
	check(t, sub, writeIndexOf[rpc.SubmitResult])
	check(t, chg, writeIndexOf[rpc.ChangedResult])
	check(t, put, writeIndexOf[defrpc.PutResult])
	check(t, cr, writeIndexOf[schedrpc.CreateResult])
	check(t, fire, writeIndexOf[schedrpc.FireResult])
	check(t, acl, writeIndexOf[rpc.ACLTokenCreateResult])
	check(t, sig, writeIndexOf[rpc.SignalResult])
	check(t, rpc.ClaimResult{Tasks: []rpc.Claimed{{FencingToken: 5}, {FencingToken: 9}, {FencingToken: 7}}}, writeIndexOf[rpc.ClaimResult])
	w := rpc.WaitResult{Done: true}
	w.Run.ModifyIndex = 13
	check(t, w, writeIndexOf[rpc.WaitResult])
	if got := writeIndexOf[rpc.OK](json.RawMessage(`{"index":5}`)); got != 0 {
		t.Errorf("a result without WriteIndex raised the fence to %d", got)
	}
}

// The cost of a forwarded call on the way through a follower, relayed as
// bytes or decoded and encoded again (the follower's client socket, the
// handler, the forward; the leader answers a completion that leased the
// next task, with a 256-byte input, without doing anything).
func BenchmarkForwardedCall(b *testing.B) {
	input, _ := json.Marshal(map[string]string{"payload": strings.Repeat("x", 230)})
	answer, _ := json.Marshal(rpc.AckResult{Accepted: true, Index: 77, Tasks: []rpc.Claimed{{TaskID: "01a2445a-e282-7427-8f2a-0569945ff856/a",
		RunID: "01a2445a-e282-7427-8f2a-0569945ff856", TaskKey: "a", Type: "job", Queue: "default", Attempt: 1, FencingToken: 77, LeaseMS: 30000,
		LeaseExpiresAt: time.Now(), Input: input}}})
	// The leader's side does the least it can: the same for both.
	addr := serveClient(b, methodForward, func(context.Context, json.RawMessage) (any, error) { return rpc.RawResult(answer), nil }).Endpoint()
	addr = strings.TrimPrefix(addr, "tcp://")
	for _, relayed := range []bool{false, true} {
		name := "typed"
		if relayed {
			name = "relayed"
		}
		b.Run(name, func(b *testing.B) {
			a := &Agent{proxy: newLeaderProxy("n2", newFakeLeadership(addr), nil, slog.New(slog.DiscardHandler))}
			defer a.proxy.close()
			h := rpc.Func(a.taskHeartbeat)
			if relayed {
				h = a.relaying(rpc.MethodTaskHeartbeat, h)
			}
			conn := serveClient(b, rpc.MethodTaskHeartbeat, h)
			params := json.RawMessage(`{"task_id":"01a2445a-e282-7427-8f2a-0569945ff856/a","fencing_token":76}`)
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				var res json.RawMessage
				for pb.Next() {
					if err := conn.Call(ctx, rpc.MethodTaskHeartbeat, params, &res); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
