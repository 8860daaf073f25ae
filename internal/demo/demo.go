// Package demo holds the built-in demo handlers that `flowd dev` runs as
// workers: echo, sleep, fail, flaky and undo. They are trusted code compiled
// into the binary; a task only selects one by type.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/worker"
)

// Types lists the demo task types.
var Types = []string{"echo", "sleep", "fail", "flaky", "undo"}

// Register adds every demo handler to w.
func Register(w *worker.Worker) {
	w.Register("echo", Echo)
	w.Register("sleep", Sleep)
	w.Register("fail", Fail)
	w.Register("flaky", Flaky)
	w.Register("undo", Undo)
}

// Echo returns its input together with the results of its dependencies.
func Echo(_ context.Context, t *worker.Task) (any, error) {
	out := map[string]any{"task": t.Key, "attempt": t.Attempt}
	if len(t.Input) > 0 {
		out["input"] = t.Input
	}
	if len(t.DepResults) > 0 {
		out["deps"] = t.DepResults
	}
	return out, nil
}

// Sleep waits input.ms milliseconds (default 1000), heartbeating meanwhile
// (the SDK does that), and stops early if the lease is lost.
func Sleep(ctx context.Context, t *worker.Task) (any, error) {
	var in struct {
		MS int64 `json:"ms"`
	}
	_ = t.Decode(&in)
	if in.MS <= 0 {
		in.MS = 1000
	}
	select {
	case <-time.After(time.Duration(in.MS) * time.Millisecond):
		return map[string]any{"slept_ms": in.MS}, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// Fail always fails with input.message; input.permanent stops retries.
func Fail(_ context.Context, t *worker.Task) (any, error) {
	var in struct {
		Message   string `json:"message"`
		Permanent bool   `json:"permanent"`
	}
	_ = t.Decode(&in)
	if in.Message == "" {
		in.Message = "demo failure"
	}
	err := errors.New(in.Message)
	if in.Permanent {
		return nil, worker.Permanent(err)
	}
	return nil, err
}

// Flaky fails its first input.failures attempts (default 2), then succeeds.
func Flaky(_ context.Context, t *worker.Task) (any, error) {
	in := struct {
		Failures int `json:"failures"`
	}{Failures: 2}
	_ = t.Decode(&in)
	if t.Attempt <= in.Failures {
		return nil, fmt.Errorf("flaky: attempt %d of the first %d fails", t.Attempt, in.Failures)
	}
	return map[string]any{"succeeded_on_attempt": t.Attempt}, nil
}

// Undo is a compensation handler: it reports what it undid.
func Undo(_ context.Context, t *worker.Task) (any, error) {
	return map[string]any{"undid": t.Key, "result": json.RawMessage(orNull(t.Result))}, nil
}

func orNull(b json.RawMessage) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}
