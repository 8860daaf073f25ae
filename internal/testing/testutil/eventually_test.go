package testutil

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPollReturnsOnceTheCheckHolds(t *testing.T) {
	calls := 0
	err := Poll(5*time.Second, time.Millisecond, "the third call", func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestPollNamesWhatAndTheLastObservation(t *testing.T) {
	calls := 0
	err := Poll(20*time.Millisecond, time.Millisecond, "applied index 15", func() error {
		calls++
		return errors.New("applied 12")
	})
	if err == nil {
		t.Fatal("Poll of a check that never holds returned nil")
	}
	for _, want := range []string{"timed out after 20ms", "waiting for applied index 15", "last: applied 12"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Poll's error %q does not contain %q", err, want)
		}
	}
	if calls < 2 {
		t.Errorf("check called %d times in 20ms at 1ms intervals, want several", calls)
	}
}

func TestPollChecksOnceEvenWithNoTime(t *testing.T) {
	calls := 0
	if err := Poll(0, 0, "one call", func() error { calls++; return nil }); err != nil || calls != 1 {
		t.Fatalf("Poll(0, 0) = %v after %d calls, want nil after 1", err, calls)
	}
}

// recorder is a testing.TB that records Fatal instead of stopping.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatal(args ...any) {
	for _, a := range args {
		r.fatal += a.(error).Error()
	}
}

func TestEventuallyTrueFailsTheTestWithWhatWasAwaited(t *testing.T) {
	r := &recorder{TB: t}
	EventuallyTrue(r, 5*time.Millisecond, time.Millisecond, "the moon", func() bool { return false })
	if !strings.Contains(r.fatal, "waiting for the moon") || !strings.Contains(r.fatal, errNotYet.Error()) {
		t.Fatalf("failure %q, want one naming the moon and the unmet condition", r.fatal)
	}
	r = &recorder{TB: t}
	EventuallyTrue(r, 5*time.Millisecond, time.Millisecond, "now", func() bool { return true })
	if r.fatal != "" {
		t.Fatalf("a condition that holds failed the test: %q", r.fatal)
	}
}
