package fsm

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tinylib/msgp/msgp"

	"github.com/flowd/flowd/fsm/domain"
)

// Command is implemented by every command payload.
type Command interface {
	Type() MsgType
	// Stamp sets the leader's clock reading (ms since the epoch).
	Stamp(at int64)
	// Time returns the stamp.
	Time() int64
}

// Stamped carries the leader's clock reading. Apply uses
// now = max(last now, At), so FSM time never runs backwards across leaders.
type Stamped struct {
	At int64 `json:"at"`
}

// Stamp implements Command.
func (s *Stamped) Stamp(at int64) { s.At = at }

// Time implements Command.
func (s *Stamped) Time() int64 { return s.At }

// Submit creates a run (idempotent by ID).
type Submit struct {
	Stamped
	ID     string            `json:"id"`
	Spec   domain.Spec       `json:"spec"`
	Input  json.RawMessage   `json:"input,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	IfFull string            `json:"if_full,omitempty"` // "queue" (default) | "reject"
	// Nonce identifies the call (its retries share it): see Run.Nonce.
	Nonce string `json:"nonce,omitempty"`
	// StartAt (ms since the epoch) or DelayMS (after the entry's stamp)
	// delay the run's start; at most one is set.
	StartAt int64 `json:"start_at,omitempty"`
	DelayMS int64 `json:"delay_ms,omitempty"`
}

// Waiter is one long-polling worker's request inside a Claim.
type Waiter struct {
	WorkerID string   `json:"worker_id"`
	Queues   []string `json:"queues,omitempty"` // empty: every queue
	Types    []string `json:"types,omitempty"`  // empty: every type
	Max      int      `json:"max"`
	// RequestID makes the claim idempotent: while tasks leased to
	// (WorkerID, RequestID) are still leased, a claim with the same pair
	// returns them (same tokens) and leases nothing more.
	RequestID string `json:"request_id,omitempty"`
}

// Claim assigns ready tasks to waiting workers, all in one entry; every
// task claimed gets the entry's index as its fencing token.
type Claim struct {
	Stamped
	Waiters []Waiter `json:"waiters"`
}

// Heartbeat extends a lease.
type Heartbeat struct {
	Stamped
	TaskID string    `json:"task_id"`
	Token  uint64    `json:"token"`
	Log    *LogChunk `json:"log,omitempty"`
}

// Complete records a task's success (or a compensation's).
type Complete struct {
	Stamped
	TaskID string            `json:"task_id"`
	Token  uint64            `json:"token"`
	Result json.RawMessage   `json:"result,omitempty"`
	Spawn  []domain.TaskSpec `json:"spawn,omitempty"`
	// Claim, if set, claims up to Claim.Max ready tasks for the worker in
	// the same entry, after the completion (whether or not it was
	// accepted): a worker's result and its next task cost one entry.
	Claim *Waiter   `json:"claim,omitempty"`
	Log   *LogChunk `json:"log,omitempty"`
}

// Fail records a failed attempt.
type Fail struct {
	Stamped
	TaskID    string    `json:"task_id"`
	Token     uint64    `json:"token"`
	Error     string    `json:"error"`
	Retryable *bool     `json:"retryable,omitempty"` // nil = true
	Log       *LogChunk `json:"log,omitempty"`
}

// Reap expires every lease due at At (leader time).
type Reap struct {
	Stamped
	Limit int `json:"limit,omitempty"`
}

// Tick moves due retries back to ready and half-opens cooled-down breakers.
type Tick struct {
	Stamped
	Limit int `json:"limit,omitempty"`
}

// RunVerb is cancel / interrupt / resume / revert of one run.
type RunVerb struct {
	Stamped
	msg    MsgType
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

// Replay creates run NewID from run ParentID's frozen spec.
type Replay struct {
	Stamped
	ParentID       string          `json:"parent_id"`
	NewID          string          `json:"new_id"`
	Input          json.RawMessage `json:"input,omitempty"`
	ReuseSucceeded bool            `json:"reuse_succeeded,omitempty"`
}

// QueueSet sets a queue's concurrency cap (0 = unlimited).
type QueueSet struct {
	Stamped
	Name        string `json:"name"`
	Concurrency int    `json:"concurrency"`
}

// QueueDelete forgets a queue (its settings and pauses) that holds no
// ready or running task: a typo in queue.set must not stay forever. A task
// that later becomes ready in it brings it back with default settings.
type QueueDelete struct {
	Stamped
	Name string `json:"name"`
}

// QueuePause pauses or resumes a queue globally, or for one run.
type QueuePause struct {
	Stamped
	Name   string `json:"name"`
	RunID  string `json:"run_id,omitempty"`
	Paused bool   `json:"paused"`
}

// SettingsSet changes the given settings; nil fields are left alone.
type SettingsSet struct {
	Stamped
	MaxRunningRuns    *int   `json:"max_running_runs,omitempty"`
	RetentionMS       *int64 `json:"retention_ms,omitempty"`
	BreakerFailures   *int   `json:"breaker_failures,omitempty"`
	BreakerCooldownMS *int64 `json:"breaker_cooldown_ms,omitempty"`
	EventWindow       *int   `json:"event_window,omitempty"`
	// DefaultMaxAttempts: 0 (the contract's 1) or 1..Limits.MaxAttempts.
	DefaultMaxAttempts *int `json:"default_max_attempts,omitempty"`
}

// GC removes finished runs older than the retention period.
type GC struct {
	Stamped
	Limit int `json:"limit,omitempty"`
}

// Multi applies several commands in one entry, in order, each with its own
// result; the proposer uses it to group-commit concurrent requests.
type Multi struct {
	Stamped
	Cmds [][]byte `json:"cmds"` // each an encoded command (type byte + JSON)
}

// Noop changes nothing but the applied index (barriers, tests).
type Noop struct{ Stamped }

func (*Submit) Type() MsgType      { return MsgSubmit }
func (*Claim) Type() MsgType       { return MsgClaim }
func (*Heartbeat) Type() MsgType   { return MsgHeartbeat }
func (*Complete) Type() MsgType    { return MsgComplete }
func (*Fail) Type() MsgType        { return MsgFail }
func (*Reap) Type() MsgType        { return MsgReap }
func (*Tick) Type() MsgType        { return MsgTick }
func (c *RunVerb) Type() MsgType   { return c.msg }
func (*Replay) Type() MsgType      { return MsgReplay }
func (*QueueSet) Type() MsgType    { return MsgQueueSet }
func (*QueuePause) Type() MsgType  { return MsgQueuePause }
func (*QueueDelete) Type() MsgType { return MsgQueueDelete }
func (*SettingsSet) Type() MsgType { return MsgSettingsSet }
func (*GC) Type() MsgType          { return MsgGC }
func (*Multi) Type() MsgType       { return MsgMulti }
func (*Noop) Type() MsgType        { return MsgNoop }

// NewRunVerb builds a cancel, interrupt, resume or revert command.
func NewRunVerb(t MsgType, id string) *RunVerb { return &RunVerb{msg: t, ID: id} }

// ErrBadCommand: an entry that cannot be decoded. Apply returns it and
// changes nothing.
var ErrBadCommand = errors.New("bad command")

// Encode renders a command as its type byte followed by JSON.
func Encode(c Command) ([]byte, error) {
	if m, ok := c.(*Multi); ok {
		return appendBatch(make([]byte, 0, batchSize(m)), m), nil
	}
	if m, ok := c.(msgp.Marshaler); ok { // the binary commands (command_msgp.go)
		out := make([]byte, 1, 128)
		out[0] = byte(c.Type())
		return m.MarshalMsg(out)
	}
	body, err := marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", c.Type(), err)
	}
	out := make([]byte, 0, len(body)+1)
	out = append(out, byte(c.Type()))
	return append(out, body...), nil
}

var errIgnored = errors.New("ignored unknown command")

// Results returned by Apply (as the raft response), one per command type.

// SubmitResult is the result of Submit and Replay.
type SubmitResult struct {
	ID      string          `json:"id"`
	State   domain.RunState `json:"state"`
	Created bool            `json:"created"`
}

// Claimed is one task handed to a worker.
type Claimed struct {
	TaskID         string                     `json:"task_id"`
	RunID          string                     `json:"run_id"`
	TaskKey        string                     `json:"task_key"`
	Type           string                     `json:"type"`
	Queue          string                     `json:"queue"`
	Input          json.RawMessage            `json:"input,omitempty"`
	RunInput       json.RawMessage            `json:"run_input,omitempty"`
	Attempt        int                        `json:"attempt"`
	FencingToken   uint64                     `json:"fencing_token"`
	LeaseMS        int64                      `json:"lease_ms"`
	LeaseExpiresAt int64                      `json:"lease_expires_at"`
	DepResults     map[string]json.RawMessage `json:"dep_results"`
	// TimeoutMS and DeadlineAt: the attempt's timeout_ms and the leader
	// time it ends at (0 = none); the lease is never renewed past it.
	TimeoutMS  int64 `json:"timeout_ms,omitempty"`
	DeadlineAt int64 `json:"deadline_at,omitempty"`
	// Compensation is set when the claim is a revert handler run; Result is
	// then the task's recorded result, the thing to undo.
	Compensation bool            `json:"compensation,omitempty"`
	Result       json.RawMessage `json:"result,omitempty"`
}

// ClaimResult lists, per waiter (same order as the command), its tasks.
type ClaimResult struct {
	Assigned [][]Claimed `json:"assigned"`
}

// AckResult answers heartbeat, complete and fail. A fencing mismatch is a
// lost race: Accepted false, never an error.
type AckResult struct {
	Accepted       bool  `json:"accepted"`
	LeaseExpiresAt int64 `json:"lease_expires_at,omitempty"`
	// Claimed: the tasks a Complete with Claim leased (non-nil then).
	Claimed []Claimed `json:"claimed,omitempty"`
}

// ChangedResult answers verbs; Changed false is a lost race.
type ChangedResult struct {
	Changed bool `json:"changed"`
}

// CountResult answers reap, tick and gc.
type CountResult struct {
	Count int  `json:"count"`
	More  bool `json:"more"`
}

// MultiResult holds one result (a value or an error) per sub-command.
type MultiResult struct {
	Results []any
}
