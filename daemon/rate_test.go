package daemon

import (
	"math"
	"testing"
	"time"
)

func TestRateMeterWindow(t *testing.T) {
	r := &rateMeter{}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }

	if got := r.rate(at(0), 0); got != 0 {
		t.Fatalf("no samples: %v", got)
	}
	r.add(at(0), 100)
	if got := r.rate(at(0), 100); got != 0 {
		t.Fatalf("zero elapsed: %v", got)
	}
	// Busy: one sample a second, 10 tasks each.
	for i := 1; i <= 30; i++ {
		r.add(at(float64(i)), uint64(100+10*i))
	}
	if got := r.rate(at(30), 400); !near(got, 10) {
		t.Fatalf("busy: %v", got)
	}
	// An unchanged counter adds no sample.
	n := len(r.samples)
	r.add(at(31), 400)
	if len(r.samples) != n {
		t.Fatalf("unchanged counter sampled")
	}
	// Quiet since t=30 (no samples): 300 tasks in the window [15s, 75s].
	if got := r.rate(at(75), 400); !near(got, 150.0/60) {
		t.Fatalf("quiet for 45s: %v, want %v", got, 150.0/60)
	}
	// Quiet for over a minute: nothing in the window, and only the sample
	// that gives the value at the window's start is kept.
	if got := r.rate(at(200), 400); got != 0 {
		t.Fatalf("quiet for minutes: %v", got)
	}
	if len(r.samples) != 1 || r.samples[0].done != 400 {
		t.Fatalf("kept %v", r.samples)
	}
	// Work resumes: the window starts at the old value.
	r.add(at(201), 460)
	if got := r.rate(at(230), 460); !near(got, 1) {
		t.Fatalf("resumed: %v", got)
	}
}
