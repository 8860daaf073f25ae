package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/creachadair/jrpc2"
)

// The direct path must answer exactly as jrpc2 does: every line below is
// sent to a server with it and to one without it, and the responses must
// be the same JSON values.
func TestDirectPathAnswersAsJrpc2Does(t *testing.T) {
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"msg":"hi"}}`,
		`{"jsonrpc":"2.0","id":"s-2","method":"echo","params":{"msg":"hi"}}`,
		`{"jsonrpc":"2.0","id":-3.5,"method":"echo","params":{"msg":"a\"b\u00e9"}}`,
		`{"method":"echo","params":{"msg":"order"},"id":4,"jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":5,"method":"echo"}`,
		`{"jsonrpc":"2.0","id":6,"method":"echo","params":null}`,
		`{"jsonrpc":"2.0","id":7,"method":"echo","params":{"msg":5}}`,
		`{"jsonrpc":"2.0","id":8,"method":"echo","params":{"msg":"x","colour":1}}`,
		`{"jsonrpc":"2.0","id":9,"method":"echo","params":["x"]}`,
		`{"jsonrpc":"2.0","id":10,"method":"echo","params":3}`,
		`{"jsonrpc":"2.0","id":11,"method":"notfound","params":{"ID":"r1"}}`,
		`{"jsonrpc":"2.0","id":12,"method":"badspec"}`,
		`{"jsonrpc":"2.0","id":13,"method":"unavailable"}`,
		`{"jsonrpc":"2.0","id":14,"method":"panic"}`,
		`{"jsonrpc":"2.0","id":15,"method":"run.frobnicate"}`,
		`{"jsonrpc":"2.0","id":16,"method":"echo","extra":true}`,
		`{"jsonrpc":"1.0","id":17,"method":"echo"}`,
		`{"jsonrpc":"2.0","id":true,"method":"echo"}`,
		`{"jsonrpc":"2.0","id":19,"method":"ec\u0068o","params":{"msg":"escaped method"}}`,
		`{"jsonrpc":"2.0","id":20,"Method":"echo"}`,
		`{"jsonrpc":"2.0","id":21,"method":"cluster.status","params":{}}`,
	}
	answers := func(direct bool) []any {
		s := NewServer(newTestEnv().methods(), Options{Logger: quietLogger()})
		s.noDirect = !direct
		c := pipeServer(t, s)
		var out []any
		for _, l := range lines {
			c.send(l)
			var v any
			if err := json.Unmarshal([]byte(c.readLine()), &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return out
	}
	want, got := answers(false), answers(true)
	for i := range lines {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%s:\n direct %v\n jrpc2  %v", lines[i], got[i], want[i])
		}
	}
}

// A well-formed call runs on the direct path (jrpc2 never sees it: no
// jrpc2 request in its context), an irregular one through jrpc2.
func TestWellFormedCallsSkipJrpc2(t *testing.T) {
	viaJrpc2 := make(chan bool, 2)
	s := NewServer(map[string]Handler{
		"probe": func(ctx context.Context, _ json.RawMessage) (any, error) {
			viaJrpc2 <- jrpc2.InboundRequest(ctx) != nil
			return true, nil
		},
	}, Options{Logger: quietLogger()})
	c := pipeServer(t, s)
	c.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"probe"}`, 0)
	if <-viaJrpc2 {
		t.Error("a well-formed call went through jrpc2")
	}
	c.send(`[{"jsonrpc":"2.0","id":2,"method":"probe"}]`) // a batch
	c.readLine()
	if !<-viaJrpc2 {
		t.Error("a batch did not go through jrpc2")
	}
}

// jrpc2's rules hold on the direct path: a call whose id is in flight is
// refused, and at most MaxConcurrent calls of a connection run at once.
func TestDirectPathKeepsDuplicateIDAndConcurrencyRules(t *testing.T) {
	env := newTestEnv()
	c := pipeServer(t, NewServer(env.methods(), Options{Logger: quietLogger()}))
	c.send(`{"jsonrpc":"2.0","id":1,"method":"block","params":{"msg":"a"}}`)
	<-env.started
	r := c.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"block","params":{"msg":"dup"}}`, CodeInvalidRequest)
	if r.Error.Message != "duplicate request ID" {
		t.Fatalf("duplicate id: %+v", r.Error)
	}
	close(env.release)
	if r := c.read(); string(r.ID) != "1" || r.Error != nil {
		t.Fatalf("the first call: %+v", r)
	}

	var running, most atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 16)
	const n, limit = 10, 2
	c = pipeServer(t, NewServer(map[string]Handler{
		"hold": func(context.Context, json.RawMessage) (any, error) {
			now := running.Add(1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			started <- struct{}{}
			<-release
			running.Add(-1)
			return true, nil
		},
	}, Options{Logger: quietLogger(), MaxConcurrent: limit}))
	go func() { // net.Pipe: a write waits for the server to read it
		for i := range n {
			_, _ = fmt.Fprintf(c.nc, `{"jsonrpc":"2.0","id":%d,"method":"hold"}`+"\n", i)
		}
	}()
	for range n { // each release lets exactly one more call start
		<-started
		release <- struct{}{}
		c.read()
	}
	if m := most.Load(); m > limit {
		t.Fatalf("%d calls ran at once, limit %d", m, limit)
	}
}

// Close ends calls on the direct path at once: their contexts end with
// the connection's, and a line waiting for a concurrency slot is dropped,
// so the connection is done without waiting for its calls.
func TestCloseEndsDirectCalls(t *testing.T) {
	env := newTestEnv()
	s := NewServer(env.methods(), Options{Logger: quietLogger(), MaxConcurrent: 1})
	a, b := net.Pipe()
	defer a.Close()
	done := make(chan struct{})
	go func() { _ = s.ServeConn(context.Background(), b); close(done) }()
	go func() { _, _ = io.Copy(io.Discard, a) }()
	if _, err := io.WriteString(a, `{"jsonrpc":"2.0","id":1,"method":"block","params":{"msg":"a"}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	<-env.started
	// The second call waits for the only slot, holding the read loop.
	if _, err := io.WriteString(a, `{"jsonrpc":"2.0","id":2,"method":"block","params":{"msg":"b"}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection still waits for its call after Close")
	}
}

// A method with FlagWriteBudget runs under WriteBudget from the start on
// the direct path (its handler's own budget then makes no second context);
// any other method's context has no deadline the server set.
func TestDirectCallsOfWriteBudgetMethodsStartWithIt(t *testing.T) {
	if spec, _ := LookupMethod(MethodTaskComplete); spec.Flags&FlagWriteBudget == 0 {
		t.Fatal("task.complete lost FlagWriteBudget")
	}
	deadlines := make(chan time.Duration, 1) // 0: none
	probe := func(ctx context.Context, _ json.RawMessage) (any, error) {
		var left time.Duration
		if dl, ok := ctx.Deadline(); ok {
			left = time.Until(dl)
		}
		deadlines <- left
		return true, nil
	}
	c := pipeServer(t, NewServer(map[string]Handler{MethodTaskComplete: probe, MethodRunGet: probe}, Options{Logger: quietLogger()}))
	c.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"task.complete","params":{}}`, 0)
	if left := <-deadlines; left <= 0 || left > WriteBudget {
		t.Fatalf("task.complete ran with %v left, want (0, %v]", left, WriteBudget)
	}
	c.roundTrip(`{"jsonrpc":"2.0","id":2,"method":"run.get","params":{}}`, 0)
	if left := <-deadlines; left != 0 {
		t.Fatalf("run.get ran under a deadline the server set (%v left)", left)
	}
}
