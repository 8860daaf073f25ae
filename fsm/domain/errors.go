package domain

import "errors"

// Sentinel errors of the domain. Other layers alias these (fsm.ErrNotFound =
// domain.ErrNotFound) rather than redefining them, and the rpc package maps
// each to one protocol code in a single table.
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
)
