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
			conn := benchServe(b)
			r := bufio.NewReaderSize(conn, 64<<10)
			tmpl := bytes.Replace([]byte(c.line), []byte("%d"), nil, 1)
			at := bytes.Index([]byte(c.line), []byte("%d"))
			line := make([]byte, 0, len(tmpl)+24)
			b.ReportAllocs()
			id := 0
			cpu0 := processCPU(b)
			for b.Loop() {
				id++
				line = append(line[:0], tmpl[:at]...)
				line = strconv.AppendInt(line, int64(id), 10)
				line = append(append(line, tmpl[at:]...), '\n')
				if _, err := conn.Write(line); err != nil {
					b.Fatal(err)
				}
				resp, err := r.ReadSlice('\n')
				if err != nil {
					b.Fatal(err)
				}
				if !bytes.Contains(resp, []byte(`"result":`)) {
					b.Fatalf("reply: %s", resp)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
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

func benchServe(b *testing.B) net.Conn {
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
	conn, err := net.Dial("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Close()
		cancel()
		srv.Close()
		<-done
	})
	return conn
}
