package testutil

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Polling is for state that has no event to wait on (another process's
// applied index, a file another process writes, a value a background loop
// moves). Where a channel can say "it happened", a test waits on the
// channel instead.

// errNotYet is the last observation of a condition that has no value to
// report (EventuallyTrue).
var errNotYet = errors.New("the condition does not hold")

// Poll calls check until it returns nil, sleeping every between calls, and
// gives up once within has passed since the first call. It returns nil as
// soon as check does, otherwise an error naming what was awaited, how long,
// and check's last error. It is for code that may not fail a test itself
// (a goroutine other than the test's, a harness that returns errors).
func Poll(within, every time.Duration, what string, check func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s; last: %w", within, what, err)
		}
		if every > 0 {
			time.Sleep(every)
		}
	}
}

// Eventually polls check (see Poll) and fails the test if it has not
// returned nil within the given time; the failure says what was awaited and
// the last error check returned, so check's error should carry the last
// observed value ("applied 12, want 15"). check may itself fail the test
// (t.Fatal) for an error that waiting will not cure.
func Eventually(t testing.TB, within, every time.Duration, what string, check func() error) {
	t.Helper()
	if err := Poll(within, every, what, check); err != nil {
		t.Fatal(err)
	}
}

// EventuallyTrue is Eventually for a condition with no value worth
// reporting.
func EventuallyTrue(t testing.TB, within, every time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, within, every, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}
