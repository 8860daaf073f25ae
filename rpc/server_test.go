package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/flowd/flowd/fsm/domain"
)

type echoParams struct {
	Msg string `json:"msg"`
	N   int    `json:"n,omitempty"`
}

type echoResult struct {
	Msg string `json:"msg"`
}

// testEnv holds the knobs of the test method table.
type testEnv struct {
	started chan string   // "block" reports here when it starts (buffered)
	release chan struct{} // "block" and the "subscribe" pusher wait for it
}

func newTestEnv() *testEnv {
	return &testEnv{started: make(chan string, 16), release: make(chan struct{})}
}

func (env *testEnv) methods() map[string]Handler {
	return map[string]Handler{
		"echo": Func(func(_ context.Context, p echoParams) (echoResult, error) {
			return echoResult{Msg: p.Msg}, nil
		}),
		"cluster.status": Func(func(context.Context, struct{}) (map[string]string, error) {
			return map[string]string{"node_id": "n1", "state": "leader"}, nil
		}),
		"notfound": Func(func(_ context.Context, p struct{ ID string }) (any, error) {
			return nil, fmt.Errorf("run %s: %w", p.ID, domain.ErrNotFound)
		}),
		"badspec": Func(func(context.Context, struct{}) (any, error) {
			return nil, &domain.SpecError{Problems: []domain.Problem{
				{Code: domain.CodeCycle, Path: "tasks[0].deps", Message: "dependency cycle: a -> b -> a"},
				{Code: domain.CodeUnknownField, Path: "tasks[1].colour", Message: `unknown field "colour"`},
			}}
		}),
		"unavailable": Func(func(context.Context, struct{}) (any, error) {
			return nil, fmt.Errorf("propose: %w", &domain.UnavailableError{Reason: "no leader", RetryAfter: 1200 * time.Millisecond})
		}),
		"panic": Func(func(context.Context, struct{}) (any, error) {
			var m map[string]int
			//lint:ignore SA5000 the handler panics on purpose
			m["boom"]++ // nil map write
			return nil, nil
		}),
		"block": Func(func(ctx context.Context, p echoParams) (echoResult, error) {
			env.started <- p.Msg
			select {
			case <-env.release:
				return echoResult{Msg: p.Msg}, nil
			case <-ctx.Done():
				return echoResult{}, ctx.Err()
			}
		}),
		"subscribe": Func(func(ctx context.Context, p echoParams) (map[string]string, error) {
			err := Spawn(ctx, func(cctx context.Context) {
				select {
				case <-env.release: // only after the handler has returned
				case <-cctx.Done():
					return
				}
				for i := range p.N {
					if err := Notify(cctx, "event", map[string]int{"index": i}); err != nil {
						return
					}
				}
			})
			return map[string]string{"subscription": "s1"}, err
		}),
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// rawConn is a test client speaking raw lines to a server over net.Pipe.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

type wireResp struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *Error          `json:"error"`
}

func pipeServer(t *testing.T, s *Server) *rawConn {
	t.Helper()
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() { _ = s.ServeConn(context.Background(), b); close(done) }()
	t.Cleanup(func() { a.Close(); <-done })
	_ = a.SetDeadline(time.Now().Add(20 * time.Second)) // a hang fails instead of blocking
	return &rawConn{t: t, nc: a, r: bufio.NewReaderSize(a, 1<<20)}
}

func (c *rawConn) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, line+"\n"); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *rawConn) readLine() string {
	c.t.Helper()
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v (got %q)", err, line)
	}
	return strings.TrimSuffix(line, "\n")
}

func (c *rawConn) read() wireResp {
	c.t.Helper()
	line := c.readLine()
	var r wireResp
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		c.t.Fatalf("bad response %q: %v", line, err)
	}
	return r
}

// roundTrip sends line and expects one response with the given error code
// (0: success).
func (c *rawConn) roundTrip(line string, code int) wireResp {
	c.t.Helper()
	c.send(line)
	r := c.read()
	switch {
	case code == 0 && r.Error != nil:
		c.t.Fatalf("%s: unexpected error %v", line, r.Error)
	case code != 0 && (r.Error == nil || r.Error.Code != code):
		c.t.Fatalf("%s: got %+v, want code %d", line, r, code)
	}
	return r
}

func (c *rawConn) echoOK(id int) {
	c.t.Helper()
	r := c.roundTrip(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"echo","params":{"msg":"hi"}}`, id), 0)
	if string(r.ID) != fmt.Sprint(id) || string(r.Result) != `{"msg":"hi"}` {
		c.t.Fatalf("echo: %+v", r)
	}
}

func TestProtocolErrorsKeepConnectionUsable(t *testing.T) {
	env := newTestEnv()
	c := pipeServer(t, NewServer(env.methods(), Options{Logger: quietLogger()}))
	cases := []struct {
		name, line string
		code       int
		inMessage  string
	}{
		{"invalid json", `{"jsonrpc":"2.0","id":1,"method":`, CodeParseError, "jq -c"},
		{"not 2.0", `{"jsonrpc":"1.0","id":2,"method":"echo"}`, CodeInvalidRequest, ""},
		{"no version", `{"id":3,"method":"echo"}`, CodeInvalidRequest, ""},
		{"unknown method", `{"jsonrpc":"2.0","id":4,"method":"run.frobnicate"}`, CodeMethodNotFound, "run.frobnicate"},
		{"wrong param type", `{"jsonrpc":"2.0","id":5,"method":"echo","params":{"msg":5}}`, CodeInvalidParams, "msg: want string, got number"},
		{"unknown param", `{"jsonrpc":"2.0","id":6,"method":"echo","params":{"msg":"x","colour":1}}`, CodeInvalidParams, `unknown field "colour"`},
		{"params not object", `{"jsonrpc":"2.0","id":7,"method":"echo","params":["x"]}`, CodeInvalidParams, "array"},
		{"params scalar", `{"jsonrpc":"2.0","id":8,"method":"echo","params":3}`, CodeInvalidRequest, ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			r := c.roundTrip(tc.line, tc.code)
			if !strings.Contains(r.Error.Message, tc.inMessage) {
				t.Errorf("message %q does not mention %q", r.Error.Message, tc.inMessage)
			}
			c.echoOK(100 + i)
		})
	}
}

func TestPrettyPrintedRequestIsOneParseErrorPerLine(t *testing.T) {
	c := pipeServer(t, NewServer(newTestEnv().methods(), Options{Logger: quietLogger()}))
	c.send("{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1\n}\n\n   ")
	for range 4 { // "{", `"jsonrpc": "2.0",`, `"id": 1`, "}"; blank lines are skipped
		if r := c.read(); r.Error == nil || r.Error.Code != CodeParseError || string(r.ID) != "null" {
			t.Fatalf("got %+v", r)
		}
	}
	c.echoOK(2)
}

func TestOverLongLine(t *testing.T) {
	const limit = 1024
	c := pipeServer(t, NewServer(newTestEnv().methods(), Options{MaxLine: limit, Logger: quietLogger()}))
	req := func(id, size int) string {
		head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"echo","params":{"msg":"`, id)
		tail := `"}}`
		return head + strings.Repeat("x", size-len(head)-len(tail)) + tail
	}
	for _, size := range []int{limit + 1, 300 << 10} { // just over; over the reader's 64 KiB buffer
		r := c.roundTrip(req(1, size), CodeTooLarge)
		if string(r.ID) != "null" || !strings.Contains(r.Error.Message, "1024") || !strings.Contains(r.Error.Message, "smaller") {
			t.Fatalf("too large: %+v", r.Error)
		}
		c.echoOK(2) // the same connection answers the next line
	}
	r := c.roundTrip(req(3, limit), 0) // exactly at the limit is fine
	if string(r.ID) != "3" {
		t.Fatalf("at limit: %+v", r)
	}
}

func TestResultOverLimitIsTooLarge(t *testing.T) {
	c := pipeServer(t, NewServer(newTestEnv().methods(), Options{MaxLine: 200, Logger: quietLogger()}))
	msg := strings.Repeat("y", 190)
	c.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"msg":"`+msg+`"}}`, CodeTooLarge)
	c.echoOK(2)
}

func TestBatch(t *testing.T) {
	c := pipeServer(t, NewServer(newTestEnv().methods(), Options{Logger: quietLogger()}))
	c.send(`[{"jsonrpc":"2.0","id":1,"method":"echo","params":{"msg":"a"}},` +
		`{"jsonrpc":"2.0","method":"echo","params":{"msg":"note"}},` +
		`{"jsonrpc":"2.0","id":2,"method":"notfound","params":{"ID":"r1"}},` +
		`{"jsonrpc":"2.0","id":3,"method":"nope"}]`)
	var rs []wireResp
	if err := json.Unmarshal([]byte(c.readLine()), &rs); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range rs {
		code := 0
		if r.Error != nil {
			code = r.Error.Code
		}
		got[string(r.ID)] = code
	}
	want := map[string]int{"1": 0, "2": CodeNotFound, "3": CodeMethodNotFound}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batch answers %v, want %v", got, want)
	}
	c.roundTrip(`[]`, CodeInvalidRequest)
	c.echoOK(4)
}

func TestDomainErrorsOnTheWire(t *testing.T) {
	c := pipeServer(t, NewServer(newTestEnv().methods(), Options{Logger: quietLogger()}))
	r := c.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"notfound","params":{"ID":"r9"}}`, CodeNotFound)
	if !strings.Contains(r.Error.Message, "r9") {
		t.Errorf("not found message %q", r.Error.Message)
	}
	r = c.roundTrip(`{"jsonrpc":"2.0","id":2,"method":"badspec"}`, CodeInvalidSpec)
	if !strings.Contains(string(r.Error.Data), `"code":"cycle"`) || !strings.Contains(string(r.Error.Data), `"path":"tasks[1].colour"`) {
		t.Errorf("spec data %s", r.Error.Data)
	}
	r = c.roundTrip(`{"jsonrpc":"2.0","id":3,"method":"unavailable"}`, CodeUnavailable)
	if string(r.Error.Data) != `{"retry_after_ms":1200}` {
		t.Errorf("unavailable data %s", r.Error.Data)
	}
}

func TestPanicIsInternalErrorAndServerSurvives(t *testing.T) {
	c := pipeServer(t, NewServer(newTestEnv().methods(), Options{Logger: quietLogger()}))
	for i := range 3 {
		r := c.roundTrip(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"panic"}`, i+1), CodeInternal)
		if !strings.Contains(r.Error.Message, "panic") {
			t.Errorf("panic message %q", r.Error.Message)
		}
		c.echoOK(10 + i)
	}
}

func TestPipelinedRequestsMayReturnOutOfOrder(t *testing.T) {
	env := newTestEnv()
	c := pipeServer(t, NewServer(env.methods(), Options{Logger: quietLogger()}))
	c.send(`{"jsonrpc":"2.0","id":1,"method":"block","params":{"msg":"slow"}}`)
	<-env.started
	c.echoOK(2) // answered while 1 is still running
	close(env.release)
	if r := c.read(); string(r.ID) != "1" || string(r.Result) != `{"msg":"slow"}` {
		t.Fatalf("got %+v", r)
	}
}

func TestShutdownAnswersInFlightCalls(t *testing.T) {
	env := newTestEnv()
	s := NewServer(env.methods(), Options{Logger: quietLogger()})
	c := pipeServer(t, s)
	drained := drainBarrier(t)

	c.send(`{"jsonrpc":"2.0","id":1,"method":"block","params":{"msg":"inflight"}}`)
	<-env.started
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	<-drained // the connection stopped reading; the call is still running
	close(env.release)
	if r := c.read(); string(r.ID) != "1" || r.Error != nil {
		t.Fatalf("in-flight call: %+v", r)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := c.r.ReadString('\n'); err != io.EOF {
		t.Fatalf("after shutdown: %v, want EOF", err)
	}
	if err := s.ServeConn(context.Background(), nopConn()); err != ErrServerClosed {
		t.Fatalf("ServeConn after Shutdown: %v", err)
	}
}

func nopConn() net.Conn { a, b := net.Pipe(); b.Close(); return a }

// The fast params decode rejects unknown members itself (the flag is set
// by its bit value: see disallowUnknownFields).
func TestParamsRejectUnknownFieldsOnTheFastPath(t *testing.T) {
	var p struct {
		A int `json:"a"`
	}
	if err := gojson.UnmarshalWithOption([]byte(`{"a":1,"zz":2}`), &p, disallowUnknownFields); err == nil {
		t.Fatal("an unknown member was accepted: goccy/go-json's DisallowUnknownFields flag moved")
	}
	if err := gojson.UnmarshalWithOption([]byte(`{"a":1}`), &p, disallowUnknownFields); err != nil || p.A != 1 {
		t.Fatalf("known members: %v, a=%d", err, p.A)
	}
	if err := gojson.Unmarshal([]byte(`{"a":1,"zz":2}`), &p); err != nil {
		t.Fatalf("without the option: %v", err)
	}
}
