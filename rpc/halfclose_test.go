package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// unixServer serves methods on a Unix socket in a temp dir and returns its
// path. Used only where the socket itself is under test.
func unixServer(t *testing.T, methods map[string]Handler) (*Server, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "n1.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(methods, Options{Logger: quietLogger()})
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		// Wait for every connection, so none outlives its test.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, path
}

// drainBarrier makes the channel's end-of-input wait observable: the
// returned channel is closed once a connection has seen EOF and is waiting
// for its replies.
func drainBarrier(t *testing.T) <-chan struct{} {
	drained := make(chan struct{})
	var once sync.Once
	hook := func() { once.Do(func() { close(drained) }) }
	testHookDrain.Store(&hook)
	t.Cleanup(func() { testHookDrain.Store(nil) })
	return drained
}

func TestHalfClosedOneShotGetsAllAnswers(t *testing.T) {
	env := newTestEnv()
	drained := drainBarrier(t)
	methods := env.methods()
	methods["slow"] = Func(func(ctx context.Context, _ struct{}) (string, error) {
		select {
		case <-drained: // answer only after the server has seen the client's EOF
			return "late", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	_, path := unixServer(t, methods)
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))

	// Calls, a batch, a notification and invalid lines, then a final line
	// without its newline; every reply owed must come before the close.
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"slow"}`,
		`[{"jsonrpc":"2.0","id":2,"method":"slow"},{"jsonrpc":"2.0","id":3,"method":"echo","params":{"msg":"b"}},{"jsonrpc":"2.0","method":"echo"}]`,
		`{"jsonrpc":"2.0","method":"unknown.notification"}`,
		`[]`,
		`{"jsonrpc":"1.0","id":4,"method":"echo"}`,
		`not json`,
		`{"jsonrpc":"2.0","id":5,"method":"cluster.status"}`,
	}, "\n")
	if _, err := io.WriteString(nc, input); err != nil {
		t.Fatal(err)
	}
	if err := nc.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(nc) // the server closes after answering everything
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	nulls := 0
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var rs []wireResp
		if line := sc.Bytes(); line[0] == '[' {
			if err := json.Unmarshal(line, &rs); err != nil {
				t.Fatal(err)
			}
		} else {
			var r wireResp
			if err := json.Unmarshal(line, &r); err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
		for _, r := range rs {
			if string(r.ID) == "null" {
				nulls++
			} else {
				ids = append(ids, string(r.ID))
			}
		}
	}
	sort.Strings(ids)
	if strings.Join(ids, ",") != "1,2,3,4,5" || nulls != 2 {
		t.Fatalf("answers for ids %v and %d null-id errors, want 1-5 and 2; output:\n%s", ids, nulls, out)
	}
	if !strings.Contains(string(out), `"result":"late"`) {
		t.Fatalf("slow call not answered after EOF:\n%s", out)
	}
}

func TestSocatOneShot(t *testing.T) {
	socat, err := exec.LookPath("socat")
	if err != nil {
		t.Skip("socat not installed (apt-get install -y socat)")
	}
	drained := drainBarrier(t)
	methods := newTestEnv().methods()
	methods["cluster.status"] = Func(func(ctx context.Context, _ struct{}) (map[string]string, error) {
		select {
		case <-drained: // socat has half-closed: answer now
			return map[string]string{"node_id": "n1"}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	_, path := unixServer(t, methods)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c",
		`echo '{"jsonrpc":"2.0","id":1,"method":"cluster.status"}' | "$0" - UNIX-CONNECT:"$1"`, socat, path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("socat: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != `{"jsonrpc":"2.0","id":1,"result":{"node_id":"n1"}}` {
		t.Fatalf("socat got %q", got)
	}
}

// Conn.CloseWrite: a call in flight gets its answer after the half-close
// (the server sees the end of input only once the request is sent), and a
// call after it fails with ErrClosed without being sent.
func TestConnCloseWriteKeepsAnswers(t *testing.T) {
	in, release := make(chan struct{}, 1), make(chan struct{})
	_, path := unixServer(t, map[string]Handler{
		"slow": func(ctx context.Context, _ json.RawMessage) (any, error) {
			in <- struct{}{}
			<-release
			return "late", nil
		},
	})
	drained := drainBarrier(t)
	conn, err := Dial(context.Background(), "unix://"+path, ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got := make(chan error, 1)
	var out string
	go func() { got <- conn.Call(context.Background(), "slow", nil, &out) }()
	go func() { <-drained; close(release) }() // answer only once the server saw the half-close
	<-in
	conn.CloseWrite()
	if err := <-got; err != nil || out != "late" {
		t.Fatalf("call in flight across CloseWrite: %q %v", out, err)
	}
	if err := conn.Call(context.Background(), "slow", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after CloseWrite: %v, want ErrClosed", err)
	}
}
