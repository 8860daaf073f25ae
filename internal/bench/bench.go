// Package bench is the machinery of `flowd bench`: the queue workload
// (producers submit one-task runs while workers claim and complete them)
// and the burn-down workload (submit a backlog, then drain it), measured
// end to end through the agents' sockets. The CLI (cmd/flowd/cmd_bench.go)
// turns flags into a QueueConfig or BurndownConfig, calls RunQueue or
// RunBurndown and prints the report; this package never prints a report
// and never exits the process.
package bench

import (
	"context"
	"slices"
	"time"
)

// Latency is p50, p99 and max in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// rotate starts the endpoint list at i, spreading clients over the nodes.
func rotate(eps []string, i int) []string {
	k := i % len(eps)
	return append(append([]string(nil), eps[k:]...), eps[:k]...)
}

// percentiles is p50 and p99 in milliseconds over every worker's samples.
func percentiles(all [][]time.Duration) (p50, p99 float64) {
	l := latencyOf(slices.Concat(all...))
	return l.P50, l.P99
}

// latencyOf is p50, p99 and max in milliseconds (the same ranks as the
// burn-down's percentiles).
func latencyOf(xs []time.Duration) Latency {
	if len(xs) == 0 {
		return Latency{}
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return Latency{P50: ms(xs[len(xs)/2]), P99: ms(xs[len(xs)*99/100]), Max: ms(xs[len(xs)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// pauseUntil waits until at; false when ctx ended first.
func pauseUntil(ctx context.Context, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
