package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// The queue workload's two hot calls, as the SDK sends them: run.submit
// (one per job) and task.complete with claim (each completion also leases
// the worker's next task).
const (
	benchSubmitLine   = `{"jsonrpc":"2.0","id":%d,"method":"run.submit","params":{"id":"01937a2e-7f1c-7d2a-9f00-0123456789ab","workflow":{"name":"peerqueues","tasks":[{"key":"job","type":"peerqueues_noop","input":{"seq":1,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}]},"nonce":"0193a7b2-0000-7000-8000-000000000001"}}`
	benchCompleteLine = `{"jsonrpc":"2.0","id":%d,"method":"task.complete","params":{"task_id":"01937a2e-7f1c-7d2a-9f00-0123456789ab/job","fencing_token":4711,"result":{"ok":true},"claim":{"worker_id":"w-17","queues":["default"],"max":1,"request_id":"0193a7b2-0000-7000-8000-000000000002"}}}`
)

func benchMethods() map[string]Handler {
	lease := time.Date(2026, 12, 5, 3, 0, 30, 0, time.UTC)
	return map[string]Handler{
		MethodRunSubmit: Func(func(_ context.Context, p SubmitParams) (SubmitResult, error) {
			return SubmitResult{ID: p.ID, State: domain.RunPending, Created: true, Index: 123456}, nil
		}),
		MethodTaskComplete: Func(func(_ context.Context, p CompleteParams) (AckResult, error) {
			return AckResult{Accepted: true, Index: 123457, Tasks: []Claimed{{
				TaskID: "01937a2e-7f1c-7d2a-9f00-0123456789ac/job", RunID: "01937a2e-7f1c-7d2a-9f00-0123456789ac",
				TaskKey: "job", Type: "peerqueues_noop", Queue: "default",
				Input:   json.RawMessage(`{"seq":2,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`),
				Attempt: 1, FencingToken: 4712, LeaseMS: 30000, LeaseExpiresAt: lease,
			}}}, nil
		}),
	}
}

// BenchmarkServerRoundTrip measures one call's round trip through a
// served Unix socket connection (the direct path: read, scan, decode,
// handler, encode, write), client included. -benchmem reports the bytes
// and allocations of both sides; the client reuses its buffers. A round
// trip's ns/op is mostly waiting (two goroutine wake-ups and two socket
// hops); cpu-ns/op is the process's CPU time per call (user and system,
// both sides), what an agent saves per call.
func BenchmarkServerRoundTrip(b *testing.B) {
	for _, c := range []struct{ name, line string }{
		{"submit", benchSubmitLine},
		{"complete_claim", benchCompleteLine},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := benchServe(b)
			cl := newBenchClient(b, srv, c.line)
			if cl == nil {
				b.FailNow()
			}
			b.ReportAllocs()
			cpu0 := processCPU(b)
			for b.Loop() {
				cl.roundTrip(b)
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
	// 64 connections, one call in flight on each, as the queue workload's
	// workers: replies of different connections never share a write, and
	// the agent's CPU per call is what the scheduler and sockets cost.
	b.Run("complete_claim_64conns", func(b *testing.B) {
		srv := benchServe(b)
		b.SetParallelism(32) // x GOMAXPROCS goroutines, one connection each
		b.ReportAllocs()
		cpu0 := processCPU(b)
		b.RunParallel(func(pb *testing.PB) {
			cl := newBenchClient(b, srv, benchCompleteLine)
			if cl == nil {
				return
			}
			for pb.Next() {
				cl.roundTrip(b)
			}
		})
		b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	})
}

type benchClient struct {
	conn     net.Conn
	r        *bufio.Reader
	tmpl     []byte
	at       int
	line     []byte
	id       int
	wantPart []byte
}

func newBenchClient(b *testing.B, path, line string) *benchClient {
	conn, err := net.Dial("unix", path)
	if err != nil {
		b.Error(err)
		return nil
	}
	b.Cleanup(func() { conn.Close() })
	at := bytes.Index([]byte(line), []byte("%d"))
	tmpl := bytes.Replace([]byte(line), []byte("%d"), nil, 1)
	return &benchClient{conn: conn, r: bufio.NewReaderSize(conn, 64<<10), tmpl: tmpl, at: at,
		line: make([]byte, 0, len(tmpl)+24), wantPart: []byte(`"result":`)}
}

func (c *benchClient) roundTrip(b *testing.B) {
	c.id++
	c.line = append(c.line[:0], c.tmpl[:c.at]...)
	c.line = strconv.AppendInt(c.line, int64(c.id), 10)
	c.line = append(append(c.line, c.tmpl[c.at:]...), '\n')
	if _, err := c.conn.Write(c.line); err != nil {
		b.Error(err)
		return
	}
	resp, err := c.r.ReadSlice('\n')
	if err != nil {
		b.Error(err)
		return
	}
	if !bytes.Contains(resp, c.wantPart) {
		b.Errorf("reply: %s", resp)
	}
}

// processCPU is the CPU time the process has used (user and system), ns.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// benchServe serves benchMethods on a Unix socket and returns its path.
func benchServe(b *testing.B) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	srv := NewServer(benchMethods(), Options{Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, ln) }()
	b.Cleanup(func() {
		cancel()
		srv.Close()
		<-done
	})
	return path
}
