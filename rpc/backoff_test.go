package rpc

import (
	"testing"
	"time"
)

func TestBackoffBoundsAndRetryAfter(t *testing.T) {
	for attempt := 0; attempt < 40; attempt++ {
		ceil := min(5*time.Second, (50*time.Millisecond)<<min(attempt, 29))
		for i := 0; i < 50; i++ {
			if d := Backoff(attempt, 50*time.Millisecond, 5*time.Second, nil); d < 0 || d > ceil {
				t.Fatalf("attempt %d: %v outside [0, %v]", attempt, d, ceil)
			}
		}
	}
	unavailable := Errorf(CodeUnavailable, "no leader")
	unavailable.Data = mustJSON(map[string]int{"retry_after_ms": 800})
	if d := Backoff(0, time.Millisecond, time.Millisecond, unavailable); d < 800*time.Millisecond {
		t.Fatalf("retry_after_ms not honoured: %v", d)
	}
}
