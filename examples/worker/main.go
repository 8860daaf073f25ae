// Command worker is an example flowd worker built on the Go SDK. It serves
// every task type the example workflows in ../workflows use.
//
//	go run ./examples/worker --addr unix:///tmp/flowd-dev/n1.sock,unix:///tmp/flowd-dev/n2.sock
//
// Handlers are ordinary Go functions registered by type; the SDK claims
// tasks, heartbeats their leases, reports results with the fencing token,
// retries connections, and drains on SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/worker"
)

func main() {
	addr := flag.String("addr", os.Getenv("FLOWD_ADDR"), "comma-separated agent endpoints (FLOWD_ADDR)")
	id := flag.String("id", "", "worker id (default hostname-pid)")
	concurrency := flag.Int("concurrency", 8, "task slots")
	journal := flag.String("journal", "", "append one line per handler call to this file (for tests and demos)")
	flag.Parse()
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "worker: set --addr or FLOWD_ADDR (flowd dev prints it)")
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	w, err := worker.New(strings.Split(*addr, ","), worker.Options{ID: *id, Concurrency: *concurrency, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	j := &recorder{path: *journal}
	register(w, j)
	if err := w.RunWithSignals(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// recorder appends "type key [revert]" lines, so a test can assert the
// order of calls (e.g. compensations in reverse dependency order).
type recorder struct {
	mu   sync.Mutex
	path string
}

func (r *recorder) note(t *worker.Task, what string) {
	if r.path == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	line := what + " " + t.Type + " " + t.Key
	if t.Compensation {
		line += " revert"
	}
	fmt.Fprintln(f, line)
}

func register(w *worker.Worker, j *recorder) {
	handle := func(typ string, h worker.Handler) {
		w.Register(typ, func(ctx context.Context, t *worker.Task) (any, error) {
			j.note(t, "call")
			res, err := h(ctx, t)
			switch {
			case ctx.Err() != nil:
				j.note(t, "cancelled")
			case err != nil:
				j.note(t, "failed")
			default:
				j.note(t, "done")
			}
			return res, err
		})
	}

	// ETL: extract -> transform x3 -> load, results flowing via dep_results.
	handle("extract", func(_ context.Context, t *worker.Task) (any, error) {
		var in struct{ Rows []int }
		if err := t.Decode(&in); err != nil {
			return nil, worker.Permanent(err)
		}
		return map[string]any{"rows": in.Rows}, nil
	})
	handle("transform", func(_ context.Context, t *worker.Task) (any, error) {
		var in struct{ Part, Of int }
		var src struct{ Rows []int }
		if err := t.Decode(&in); err != nil || in.Of <= 0 {
			return nil, worker.Permanent(fmt.Errorf("transform needs input {part, of}: %v", err))
		}
		if err := decodeDep(t, "extract", &src); err != nil {
			return nil, worker.Permanent(err)
		}
		sum := 0
		for i, v := range src.Rows {
			if i%in.Of == in.Part {
				sum += v * 2
			}
		}
		return map[string]int{"sum": sum}, nil
	})
	handle("load", func(_ context.Context, t *worker.Task) (any, error) {
		total := 0
		for key := range t.DepResults {
			var r struct{ Sum int }
			if err := decodeDep(t, key, &r); err != nil {
				return nil, worker.Permanent(err)
			}
			total += r.Sum
		}
		return map[string]int{"total": total, "parts": len(t.DepResults)}, nil
	})

	// Dynamic fan-out: split spawns children; join sees all their results.
	handle("split", func(_ context.Context, t *worker.Task) (any, error) {
		var in struct{ Items int }
		_ = t.Decode(&in)
		var kids []domain.TaskSpec
		for i := 0; i < in.Items; i++ {
			kids = append(kids, domain.TaskSpec{Key: fmt.Sprintf("item-%03d", i), Type: "square",
				Input: []byte(fmt.Sprintf(`{"n":%d}`, i))})
		}
		return map[string]int{"spawned": in.Items}, t.Spawn(kids...)
	})
	handle("square", func(_ context.Context, t *worker.Task) (any, error) {
		var in struct{ N int }
		_ = t.Decode(&in)
		return map[string]int{"square": in.N * in.N}, nil
	})
	handle("join", func(_ context.Context, t *worker.Task) (any, error) {
		count, sum := 0, 0
		for key := range t.DepResults {
			if !strings.HasPrefix(key, "item-") {
				continue
			}
			var r struct{ Square int }
			_ = decodeDep(t, key, &r)
			count++
			sum += r.Square
		}
		return map[string]int{"count": count, "sum": sum}, nil
	})

	// for_each (examples/workflows/foreach.yaml): each element task gets
	// its element as input.item; the loop task's dependents receive the
	// element results as one list, in order.
	handle("square-item", func(_ context.Context, t *worker.Task) (any, error) {
		var in struct{ Item int }
		if err := t.Decode(&in); err != nil {
			return nil, worker.Permanent(err)
		}
		return in.Item * in.Item, nil
	})
	handle("gather", func(_ context.Context, t *worker.Task) (any, error) {
		var squares []int
		for key := range t.DepResults {
			if err := decodeDep(t, key, &squares); err != nil {
				return nil, worker.Permanent(err)
			}
		}
		sum := 0
		for _, s := range squares {
			sum += s
		}
		return map[string]any{"count": len(squares), "sum": sum, "squares": squares}, nil
	})

	// A flaky call that succeeds on a later attempt.
	handle("flaky-api", func(_ context.Context, t *worker.Task) (any, error) {
		var in struct {
			FailFirst int `json:"fail_first"`
		}
		_ = t.Decode(&in)
		if t.Attempt <= in.FailFirst {
			return nil, fmt.Errorf("upstream returned 503 on attempt %d", t.Attempt)
		}
		return map[string]any{"status": 200, "attempt": t.Attempt}, nil
	})
	handle("report", func(_ context.Context, t *worker.Task) (any, error) {
		return map[string]int{"inputs": len(t.DepResults)}, nil
	})

	// The saga and its compensations. The idempotency key makes a repeated
	// side effect (after a lost acknowledgement) safe to detect.
	handle("reserve", func(_ context.Context, t *worker.Task) (any, error) {
		return map[string]string{"reservation": "R-" + t.IdempotencyKey()}, nil
	})
	handle("charge", func(_ context.Context, t *worker.Task) (any, error) {
		return map[string]string{"charge": "C-" + t.IdempotencyKey()}, nil
	})
	handle("ship", func(_ context.Context, t *worker.Task) (any, error) {
		var in struct{ Fail bool }
		_ = t.Decode(&in)
		if in.Fail {
			return nil, worker.Permanent(errors.New("carrier rejected the shipment"))
		}
		return map[string]string{"tracking": "T-1"}, nil
	})
	handle("release", func(_ context.Context, t *worker.Task) (any, error) {
		return map[string]any{"released": string(t.Result)}, nil
	})
	handle("refund", func(_ context.Context, t *worker.Task) (any, error) {
		var in struct {
			FailRefund bool `json:"fail_refund"`
		}
		_ = t.Decode(&in)
		if in.FailRefund {
			return nil, errors.New("payment provider refused the refund")
		}
		return map[string]any{"refunded": string(t.Result)}, nil
	})

	// echo returns its input (used by examples/workflows/hello.json).
	handle("echo", func(_ context.Context, t *worker.Task) (any, error) {
		return map[string]any{"input": t.Input, "deps": len(t.DepResults)}, nil
	})

	// panic shows that a handler panic fails the task (with the panic
	// message) and the worker keeps serving.
	handle("panic", func(context.Context, *worker.Task) (any, error) {
		panic("example handler panic")
	})

	// A long task: the SDK heartbeats its lease while it runs.
	handle("long", func(ctx context.Context, t *worker.Task) (any, error) {
		var in struct{ Seconds float64 }
		_ = t.Decode(&in)
		select {
		case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
			return map[string]float64{"worked_seconds": in.Seconds}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
}

func decodeDep(t *worker.Task, key string, v any) error {
	raw, ok := t.DepResults[key]
	if !ok {
		return fmt.Errorf("missing result of dependency %q", key)
	}
	return json.Unmarshal(raw, v)
}
