package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// Protocol error codes: the JSON-RPC 2.0 standard ones and flowd's own
// (docs/rpc.md, which includes the client contract). They are stable API.
const (
	CodeParseError        = -32700 // the line is not valid JSON
	CodeInvalidRequest    = -32600 // not a JSON-RPC 2.0 request object
	CodeMethodNotFound    = -32601 // no such method
	CodeInvalidParams     = -32602 // params do not decode, or a malformed argument
	CodeInternal          = -32603 // a server bug (including a recovered panic)
	CodeNotFound          = -32001 // no such run / task / workflow
	CodeIllegalTransition = -32002 // the edge is not in the state machine's table
	CodeInvalidSpec       = -32003 // invalid workflow spec; data.problems lists them
	CodeUnavailable       = -32004 // no leader / not enough nodes; data.retry_after_ms
	CodeTooManyRuns       = -32005 // the concurrent-run cap is reached
	CodeTooLarge          = -32006 // a request, result or spec over its limit
	CodePermissionDenied  = -32007 // the caller's role does not allow the method; data.role, data.method
)

// DefaultRetryAfter is the retry hint sent with CodeUnavailable when the
// error does not carry its own.
const DefaultRetryAfter = 500 * time.Millisecond

// codeRow is one row of the error table. sentinels are matched with
// errors.Is, in table order, by ToError; sentinels[0] (if any) is what an
// *Error with this code unwraps to on the client side.
type codeRow struct {
	code      int
	name      string
	sentinels []error
}

// table is THE error table: every mapping between Go errors and protocol
// codes, in both directions, goes through it. Order matters for errors that
// match several rows (the first match wins).
var table = []codeRow{
	{CodeNotFound, "not_found", []error{domain.ErrNotFound}},
	{CodeIllegalTransition, "illegal_transition", []error{domain.ErrIllegalTransition}},
	{CodeInvalidSpec, "invalid_spec", []error{domain.ErrInvalidSpec}},
	{CodeUnavailable, "unavailable", []error{domain.ErrUnavailable, context.DeadlineExceeded, context.Canceled}},
	{CodeTooManyRuns, "too_many_runs", []error{domain.ErrTooManyRuns}},
	{CodeTooLarge, "too_large", []error{domain.ErrTooLarge}},
	{CodePermissionDenied, "permission_denied", []error{ErrPermissionDenied}},
	{CodeInvalidParams, "invalid_params", []error{domain.ErrInvalidArgument}},
	{CodeParseError, "parse_error", nil},
	{CodeInvalidRequest, "invalid_request", nil},
	{CodeMethodNotFound, "method_not_found", nil},
	{CodeInternal, "internal", nil},
}

func rowOf(code int) *codeRow {
	for i := range table {
		if table[i].code == code {
			return &table[i]
		}
	}
	return nil
}

// CodeName returns the protocol name of code ("not_found", "unavailable",
// ...), or "error_<code>" for a code outside the table.
func CodeName(code int) string {
	if r := rowOf(code); r != nil {
		return r.name
	}
	return "error_" + strconv.Itoa(code)
}

// Error is a JSON-RPC error object as it travels on the wire. Handlers may
// return one directly (it passes through ToError unchanged); clients get one
// from every protocol-level failure (see FromWire).
//
// On the client side an *Error unwraps to the domain sentinel of its code, so
// errors.Is(err, domain.ErrNotFound) holds for -32001; errors.As into
// *domain.SpecError works for -32003 (problems decoded from Data) and into
// *domain.UnavailableError for -32004 (RetryAfter from data.retry_after_ms).
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error returns the message followed by the code name and number, e.g.
// "run 0192… not found (not_found -32001)".
func (e *Error) Error() string {
	return e.Message + " (" + CodeName(e.Code) + " " + strconv.Itoa(e.Code) + ")"
}

// Unwrap returns the domain sentinel of e's code (nil for the standard
// JSON-RPC codes, which have none).
func (e *Error) Unwrap() error {
	if r := rowOf(e.Code); r != nil && len(r.sentinels) > 0 {
		return r.sentinels[0]
	}
	return nil
}

// As lets errors.As rebuild the structured domain errors from the wire form:
// **domain.SpecError for CodeInvalidSpec and **domain.UnavailableError for
// CodeUnavailable.
func (e *Error) As(target any) bool {
	switch t := target.(type) {
	case **domain.SpecError:
		if e.Code != CodeInvalidSpec {
			return false
		}
		var d struct {
			Problems []domain.Problem `json:"problems"`
		}
		_ = json.Unmarshal(e.Data, &d) // best effort: a bad data field leaves no problems
		*t = &domain.SpecError{Problems: d.Problems}
		return true
	case **domain.UnavailableError:
		if e.Code != CodeUnavailable {
			return false
		}
		*t = &domain.UnavailableError{Reason: e.Message, RetryAfter: e.RetryAfter()}
		return true
	}
	return false
}

// RetryAfter returns data.retry_after_ms as a duration, DefaultRetryAfter if
// e is CodeUnavailable without a usable hint, and 0 for other codes.
func (e *Error) RetryAfter() time.Duration {
	if e.Code != CodeUnavailable {
		return 0
	}
	var d struct {
		RetryAfterMS int64 `json:"retry_after_ms"`
	}
	if json.Unmarshal(e.Data, &d) != nil || d.RetryAfterMS <= 0 {
		return DefaultRetryAfter
	}
	return time.Duration(d.RetryAfterMS) * time.Millisecond
}

// ToError maps any handler error to its protocol error through the table
// (server side). nil gives nil. An *Error anywhere in the chain is returned
// as is (this keeps code, message and data intact when a follower forwards
// a leader's error). Otherwise the first table row with a matching sentinel
// (errors.Is) gives the code, with data for -32003 ({"problems": [...]}) and
// -32004 ({"retry_after_ms": N}); anything else is CodeInternal. The message
// is err.Error().
func ToError(err error) *Error {
	if err == nil {
		return nil
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	for _, r := range table {
		for _, s := range r.sentinels {
			if errors.Is(err, s) {
				return withData(r.code, err)
			}
		}
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

func withData(code int, err error) *Error {
	e := &Error{Code: code, Message: err.Error()}
	switch code {
	case CodeInvalidSpec:
		problems := []domain.Problem{{Code: "invalid_spec", Path: "$", Message: err.Error()}}
		if se, ok := errors.AsType[*domain.SpecError](err); ok && len(se.Problems) > 0 {
			problems = se.Problems
		}
		e.Data = mustJSON(map[string]any{"problems": problems})
	case CodeUnavailable:
		retry := DefaultRetryAfter
		if ue, ok := errors.AsType[*domain.UnavailableError](err); ok && ue.RetryAfter > 0 {
			retry = ue.RetryAfter
		}
		switch {
		case errors.Is(err, domain.ErrUnavailable):
		case errors.Is(err, context.DeadlineExceeded):
			e.Message = "request timed out (" + err.Error() + "); retry, with a longer deadline if the cluster is busy"
		default:
			e.Message = "request cancelled (" + err.Error() + "); the server may be shutting down, retry"
		}
		e.Data = mustJSON(map[string]int64{"retry_after_ms": max(retry.Milliseconds(), 1)})
	}
	return e
}

// FromWire rebuilds the error a client gets from a JSON-RPC error object
// (client side). The result is always an *Error; see its doc for errors.Is
// and errors.As support.
func FromWire(code int, message string, data json.RawMessage) error {
	if len(data) == 0 || string(data) == "null" {
		data = nil
	}
	return &Error{Code: code, Message: message, Data: data}
}

// Errorf is a shorthand for handlers that want a specific code without a
// domain sentinel, e.g. Errorf(CodeInvalidParams, "limit %d is negative", n).
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
