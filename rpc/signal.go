package rpc

import (
	"context"
	"encoding/json"
)

// Signals (docs/rpc.md, "Signals and waiting tasks"): task.signal completes
// one waiting task (type wait) with a payload; run.signal delivers a named
// signal to every waiting task of a run that listens for it. Both need the
// role a submit needs (admin-only in methodtable.go, where the method names
// are).

// TaskSignalParams of task.signal. RunID and Key name the task (the run id
// may be a unique prefix); TaskID "<run>/<key>" may be given instead.
// SignalID makes the signal idempotent: re-sending it is accepted again and
// changes nothing. FencingToken, if set, must be the wait's token (task.get
// shows it), so a signal meant for one wait cannot complete a later one.
type TaskSignalParams struct {
	RunID        string          `json:"run_id,omitempty"`
	Key          string          `json:"key,omitempty"`
	TaskID       string          `json:"task_id,omitempty"`
	Payload      json.RawMessage `json:"payload,omitempty"`
	SignalID     string          `json:"signal_id,omitempty"`
	FencingToken uint64          `json:"fencing_token,omitempty"`
}

// RunSignalParams of run.signal: Name reaches every waiting task of the
// run whose spec's signal is Name (or, naming none, whose key is Name).
type RunSignalParams struct {
	RunID    string          `json:"run_id"`
	Name     string          `json:"name"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	SignalID string          `json:"signal_id,omitempty"`
}

// SignalResult of task.signal and run.signal. Accepted false is a lost race
// (no task was waiting: not yet, or no longer), not an error. Tasks lists
// the keys the signal completed.
type SignalResult struct {
	Accepted bool     `json:"accepted"`
	Tasks    []string `json:"tasks,omitempty"`
	State    string   `json:"state,omitempty"`
	Index    uint64   `json:"index,omitempty"`
}

// WriteIndex implements the read-your-writes contract (see AckResult).
func (r SignalResult) WriteIndex() uint64 { return r.Index }

// TaskSignal calls task.signal. Give p a SignalID to make retries safe.
func (c *Client) TaskSignal(ctx context.Context, p TaskSignalParams) (*SignalResult, error) {
	return call[SignalResult](ctx, c.idempotentIf(p.SignalID != ""), MethodTaskSignal, p)
}

// RunSignal calls run.signal. Give p a SignalID to make retries safe.
func (c *Client) RunSignal(ctx context.Context, p RunSignalParams) (*SignalResult, error) {
	return call[SignalResult](ctx, c.idempotentIf(p.SignalID != ""), MethodRunSignal, p)
}
