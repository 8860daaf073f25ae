package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// pipeConn connects a Conn to s over net.Pipe.
func pipeConn(t *testing.T, s *Server, opts ConnOptions) (*Conn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() { _ = s.ServeConn(context.Background(), b); close(done) }()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	c := NewConn(a, opts)
	t.Cleanup(func() { c.Close(); b.Close(); <-done })
	return c, b
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestConnCallsAndErrors(t *testing.T) {
	ctx := testCtx(t)
	c, _ := pipeConn(t, NewServer(newTestEnv().methods(), Options{Logger: quietLogger()}), ConnOptions{})

	var res echoResult
	if err := c.Call(ctx, "echo", echoParams{Msg: "hello"}, &res); err != nil || res.Msg != "hello" {
		t.Fatalf("echo: %v %+v", err, res)
	}

	err := c.Call(ctx, "notfound", map[string]string{"ID": "r1"}, nil)
	var pe *Error
	if !errors.Is(err, domain.ErrNotFound) || !errors.As(err, &pe) || pe.Code != CodeNotFound {
		t.Fatalf("notfound: %v", err)
	}

	err = c.Call(ctx, "badspec", nil, nil)
	var se *domain.SpecError
	if !errors.Is(err, domain.ErrInvalidSpec) || !errors.As(err, &se) || len(se.Problems) != 2 || se.Problems[0].Code != domain.CodeCycle {
		t.Fatalf("badspec: %v %+v", err, se)
	}

	err = c.Call(ctx, "unavailable", nil, nil)
	var ue *domain.UnavailableError
	if !errors.Is(err, domain.ErrUnavailable) || !errors.As(err, &ue) || ue.RetryAfter != 1200*time.Millisecond {
		t.Fatalf("unavailable: %v %+v", err, ue)
	}

	err = c.Call(ctx, "panic", nil, nil)
	if !errors.As(err, &pe) || pe.Code != CodeInternal {
		t.Fatalf("panic: %v", err)
	}
	if err := c.Call(ctx, "nope", nil, nil); !errors.As(err, &pe) || pe.Code != CodeMethodNotFound {
		t.Fatalf("nope: %v", err)
	}
	if err := c.Call(ctx, "echo", map[string]any{"msg": 1}, nil); !errors.As(err, &pe) || pe.Code != CodeInvalidParams {
		t.Fatalf("bad params: %v", err)
	}
	if err := c.Call(ctx, "echo", "scalar", nil); err == nil || !strings.Contains(err.Error(), "object or array") {
		t.Fatalf("scalar params: %v", err)
	}
	if err := c.Call(ctx, "echo", echoParams{Msg: "still fine"}, &res); err != nil || res.Msg != "still fine" {
		t.Fatalf("echo after errors: %v", err)
	}
}

func TestConnConcurrentCalls(t *testing.T) {
	ctx := testCtx(t)
	c, _ := pipeConn(t, NewServer(newTestEnv().methods(), Options{Logger: quietLogger()}), ConnOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			var res echoResult
			msg := fmt.Sprint("m", i)
			if err := c.Call(ctx, "echo", echoParams{Msg: msg}, &res); err != nil || res.Msg != msg {
				errs <- fmt.Errorf("call %d: %v %q", i, err, res.Msg)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestConnNotificationsAfterHandlerReturned(t *testing.T) {
	ctx := testCtx(t)
	env := newTestEnv()
	got := make(chan string, 10)
	c, _ := pipeConn(t, NewServer(env.methods(), Options{Logger: quietLogger()}), ConnOptions{
		OnNotify: func(method string, params json.RawMessage) { got <- method + " " + string(params) },
	})
	var res map[string]string
	if err := c.Call(ctx, "subscribe", echoParams{N: 3}, &res); err != nil || res["subscription"] != "s1" {
		t.Fatalf("subscribe: %v %v", err, res)
	}
	close(env.release) // the handler has returned; now its goroutine pushes
	for i := range 3 {
		if n := <-got; n != fmt.Sprintf(`event {"index":%d}`, i) {
			t.Fatalf("notification %d = %q", i, n)
		}
	}
}

func TestConnLossFailsPendingCalls(t *testing.T) {
	ctx := testCtx(t)
	env := newTestEnv()
	c, serverEnd := pipeConn(t, NewServer(env.methods(), Options{Logger: quietLogger()}), ConnOptions{})
	errc := make(chan error, 2)
	for i := range 2 {
		go func() { errc <- c.Call(ctx, "block", echoParams{Msg: fmt.Sprint(i)}, nil) }()
	}
	<-env.started
	<-env.started
	serverEnd.Close()
	for range 2 {
		err := <-errc
		var ce *ConnError
		if !errors.Is(err, domain.ErrUnavailable) || !errors.As(err, &ce) || ce.NotSent {
			t.Fatalf("pending call: %v", err)
		}
	}
	<-c.Done()
	if err := c.Call(ctx, "echo", nil, nil); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("call on dead conn: %v", err)
	}
}

func TestConnContextCancelReturnsPromptly(t *testing.T) {
	env := newTestEnv()
	c, _ := pipeConn(t, NewServer(env.methods(), Options{Logger: quietLogger()}), ConnOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Call(ctx, "block", echoParams{Msg: "x"}, nil) }()
	<-env.started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	close(env.release) // the late response is dropped; the conn stays usable
	var res echoResult
	if err := c.Call(testCtx(t), "echo", echoParams{Msg: "ok"}, &res); err != nil || res.Msg != "ok" {
		t.Fatalf("after cancel: %v", err)
	}
}

func TestConnResponseOverLimit(t *testing.T) {
	ctx := testCtx(t)
	c, _ := pipeConn(t, NewServer(newTestEnv().methods(), Options{Logger: quietLogger()}), ConnOptions{MaxLine: 512, MaxRequest: 4096})
	err := c.Call(ctx, "echo", echoParams{Msg: strings.Repeat("z", 1000)}, nil)
	if !errors.Is(err, domain.ErrTooLarge) {
		t.Fatalf("big response: %v", err)
	}
	if err := c.Call(ctx, "echo", echoParams{Msg: strings.Repeat("z", 5000)}, nil); !errors.Is(err, domain.ErrTooLarge) {
		t.Fatalf("big request: %v", err)
	}
	var res echoResult
	if err := c.Call(ctx, "echo", echoParams{Msg: "small"}, &res); err != nil || res.Msg != "small" {
		t.Fatalf("after: %v", err)
	}
}

func TestClientFailsOverFromDeadEndpoint(t *testing.T) {
	ctx := testCtx(t)
	_, live := unixServer(t, newTestEnv().methods())
	dead := filepath.Join(t.TempDir(), "dead.sock") // nothing listens here
	cl, err := NewClient([]string{"unix://" + dead, live}, ClientOptions{BackoffBase: time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var res echoResult
	// Not idempotent: still retried, since a failed dial sent nothing.
	if err := cl.Call(ctx, "echo", echoParams{Msg: "hi"}, &res); err != nil || res.Msg != "hi" {
		t.Fatalf("call: %v", err)
	}
	if cl.Endpoint() != live {
		t.Fatalf("endpoint %q, want %q", cl.Endpoint(), live)
	}
	// Protocol errors are returned, not failed over.
	if err := cl.Call(ctx, "notfound", nil, nil); !errors.Is(err, domain.ErrNotFound) || cl.Endpoint() != live {
		t.Fatalf("notfound: %v on %s", err, cl.Endpoint())
	}
}

func TestClientFailsOverWhenConnectionLost(t *testing.T) {
	ctx := testCtx(t)
	envA := newTestEnv()
	a, pathA := unixServer(t, envA.methods())
	envB := newTestEnv()
	close(envB.release) // B answers "block" at once
	_, pathB := unixServer(t, envB.methods())

	cl, err := NewClient([]string{pathA, pathB}, ClientOptions{BackoffBase: time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	notes := make(chan string, 4)
	cl.OnNotify(func(method string, _ json.RawMessage) { notes <- method })

	errc := make(chan error, 2)
	go func() { errc <- cl.CallIdempotent(ctx, "block", echoParams{Msg: "idem"}, nil) }()
	<-envA.started
	go func() { errc <- cl.Call(ctx, "block", echoParams{Msg: "once"}, nil) }()
	<-envA.started
	a.Close() // A dies with both calls in flight
	var results []string
	for range 2 {
		err := <-errc
		switch {
		case err == nil:
			results = append(results, "ok")
		case errors.Is(err, domain.ErrUnavailable):
			results = append(results, "unavailable")
		default:
			t.Fatalf("unexpected: %v", err)
		}
	}
	// The idempotent call was retried on B; the other was not retried.
	if strings.Join(results, ",") != "ok,unavailable" && strings.Join(results, ",") != "unavailable,ok" {
		t.Fatalf("results %v", results)
	}
	if got := <-envB.started; got != "idem" || cl.Endpoint() != pathB {
		t.Fatalf("B ran %q, endpoint %s", got, cl.Endpoint())
	}
	// The notification hook survived the reconnect.
	if err := cl.Call(ctx, "subscribe", echoParams{N: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if m := <-notes; m != "event" {
		t.Fatalf("notification %q", m)
	}
}

func TestClientRetriesUnavailableOnlyWhenIdempotent(t *testing.T) {
	ctx := testCtx(t)
	var mu sync.Mutex
	calls := 0
	methods := map[string]Handler{"flaky": Func(func(context.Context, struct{}) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls < 3 {
			return "", &domain.UnavailableError{Reason: "no leader yet", RetryAfter: time.Millisecond}
		}
		return "ok", nil
	})}
	_, path := unixServer(t, methods)
	cl, err := NewClient([]string{path}, ClientOptions{BackoffBase: time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Call(ctx, "flaky", nil, nil); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("non-idempotent: %v", err)
	}
	// Resendable (a claim): sent again after a lost answer, but its
	// -32004 is the caller's.
	if err := cl.CallResendable(ctx, "flaky", nil, nil); !errors.Is(err, domain.ErrUnavailable) || calls != 2 {
		t.Fatalf("resendable: %v after %d calls", err, calls)
	}
	var res string
	if err := cl.CallIdempotent(ctx, "flaky", nil, &res); err != nil || res != "ok" || calls != 3 {
		t.Fatalf("idempotent: %v %q after %d calls", err, res, calls)
	}
	cl.Close()
	if err := cl.Call(ctx, "flaky", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestShutdownClosesIdleConnections(t *testing.T) {
	s := NewServer(newTestEnv().methods(), Options{Logger: quietLogger()})
	c, _ := pipeConn(t, s, ConnOptions{})
	if err := c.Call(testCtx(t), "echo", echoParams{Msg: "x"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(testCtx(t)); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	<-c.Done()
	if err := c.Call(testCtx(t), "echo", nil, nil); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("after Shutdown: %v", err)
	}
}

// A call that runs out of time while dialing again still says why the
// earlier tries failed (no agent at the endpoint): the CLI's hint depends
// on it. Tight deadlines against a socket that does not exist end in the
// retry's sleep or in the next dial alike; both must carry the ConnError.
func TestDeadlineKeepsTheLastConnectionError(t *testing.T) {
	c, err := NewClient([]string{"unix:///nonexistent/flowd-a.sock", "unix:///nonexistent/flowd-b.sock"},
		ClientOptions{MaxAttempts: 1000, BackoffBase: 10 * time.Microsecond, BackoffCap: 50 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(200+i*13)*time.Microsecond)
		var out json.RawMessage
		err := c.Call(ctx, "cluster.status", nil, &out)
		cancel()
		if _, ok := errors.AsType[*ConnError](err); !ok {
			t.Fatalf("try %d: %v: the connection error was lost", i, err)
		}
	}
}

// encodeRequest appends the envelope around the encoded params; it is the
// JSON a struct marshal gives, for plain method names and any other.
func TestEncodeRequestIsTheStructEncoding(t *testing.T) {
	for _, c := range []struct {
		method string
		params any
	}{
		{"run.submit", map[string]any{"id": "x", "workflow": json.RawMessage(`{"tasks":[{"key":"a","type":"t","input":{"s":"<&>\u2028"}}]}`)}},
		{"agent.forward", []int{1, 2}},
		{"system.hello", nil},
		{"odd \"method\"\n", map[string]string{"a": "b"}},
	} {
		got, err := encodeRequest(7, c.method, c.params)
		if err != nil {
			t.Fatal(err)
		}
		var p json.RawMessage
		if c.params != nil {
			p, _ = json.Marshal(c.params)
		}
		want, _ := json.Marshal(struct {
			V      string          `json:"jsonrpc"`
			ID     uint64          `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params,omitempty"`
		}{"2.0", 7, c.method, p})
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: not JSON: %s", c.method, got)
		}
		_ = json.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %s, want %s", c.method, got, want)
		}
	}
}
