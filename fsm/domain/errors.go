package domain

import (
	"errors"
	"time"
)

// Sentinel errors shared by every layer. Other packages alias these
// (fsm.ErrNotFound = domain.ErrNotFound) rather than redefining them, and the
// rpc package maps each to one protocol code in a single table, and back.
var (
	// ErrNotFound: no such run, task or queue.
	ErrNotFound = errors.New("not found")
	// ErrTooLarge: a request, result or spec over its limit.
	ErrTooLarge = errors.New("too large")
	// ErrTooManyRuns: the concurrent-run cap is reached and the submission
	// asked not to queue.
	ErrTooManyRuns = errors.New("too many running runs")
	// ErrInvalidArgument: a parameter is malformed (not a spec problem).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrUnavailable: no leader, or not enough nodes; retryable.
	ErrUnavailable = errors.New("unavailable")
)

// UnavailableError is an ErrUnavailable that says when to retry.
type UnavailableError struct {
	Reason     string
	RetryAfter time.Duration
	// Cause, when set, is the sentinel of the layer that gave up (e.g.
	// cluster.ErrLeadershipLost), so errors.Is matches it too.
	Cause error
}

func (e *UnavailableError) Error() string { return "unavailable: " + e.Reason }

// Unwrap makes errors.Is(err, ErrUnavailable) hold, and errors.Is(err,
// Cause) when a cause is set.
func (e *UnavailableError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrUnavailable, e.Cause}
	}
	return []error{ErrUnavailable}
}
