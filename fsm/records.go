package fsm

import (
	"encoding/json"

	"github.com/flowd/flowd/fsm/domain"
)

// Run is the stored record of one workflow run (an execution).
type Run struct {
	ID       string `json:"id"`
	Workflow string `json:"workflow"`
	// Spec is the frozen, normalized definition. It is stored under its own
	// key (written once at creation), so the run record that every task
	// transition rewrites stays small; load it with FSM.GetSpec.
	Spec      domain.Spec       `json:"-"`
	OnFailure string            `json:"on_failure"`
	Input     json.RawMessage   `json:"input,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	ParentID  string            `json:"parent_id,omitempty"`
	ReplayOf  string            `json:"replay_of,omitempty"`
	// Definition and DefinitionVersion: the stored definition the run was
	// submitted by (its spec is that version's), if any.
	Definition        string `json:"definition,omitempty"`
	DefinitionVersion int    `json:"definition_version,omitempty"`
	// Nonce is the creating call's request nonce: a retry of that call is
	// answered created:true, another call with the same id created:false.
	Nonce string          `json:"nonce,omitempty"`
	State domain.RunState `json:"state"`
	// InterruptedFrom is the state an interrupted run resumes into.
	InterruptedFrom domain.RunState `json:"interrupted_from,omitempty"`
	// Reason says why a run failed or was cancelled.
	Reason       string   `json:"reason,omitempty"`
	PausedQueues []string `json:"paused_queues,omitempty"`
	AdmitSeq     uint64   `json:"admit_seq,omitempty"`

	// Counts counts the run's tasks by state (spawned children included);
	// run state is derived from it.
	Counts domain.TaskCounts `json:"counts"`

	CreatedAt  int64 `json:"created_at"`
	StartedAt  int64 `json:"started_at,omitempty"`
	FinishedAt int64 `json:"finished_at,omitempty"`
	// StartAt is the delayed start the run was submitted with (start_at or
	// delay_ms; 0 = none): the run stays pending until then.
	StartAt int64 `json:"start_at,omitempty"`
	// DeadlineMS is the frozen spec's deadline_ms; DeadlineAt is when the
	// run passes it (set when the run starts).
	DeadlineMS int64 `json:"deadline_ms,omitempty"`
	DeadlineAt int64 `json:"deadline_at,omitempty"`
	// WakeAt is the run's timer in the wake-up index (its delayed start
	// while it waits for it, its deadline while it runs; 0 = none).
	WakeAt      int64  `json:"wake_at,omitempty"`
	CreateIndex uint64 `json:"create_index"`
	ModifyIndex uint64 `json:"modify_index"`
}

// Tasks is the number of tasks in the run, spawned children included.
func (r *Run) Tasks() int { return r.Counts.Total() }

// Task is the stored record of one task run. Retries reuse the row; every
// attempt is kept in Attempts.
type Task struct {
	RunID      string             `json:"run_id"`
	Key        string             `json:"key"`
	Seq        int                `json:"seq"` // position in the run, for display order
	Type       string             `json:"type"`
	Queue      string             `json:"queue"`
	Input      json.RawMessage    `json:"input,omitempty"`
	Deps       []string           `json:"deps,omitempty"`
	Dependents []string           `json:"dependents,omitempty"`
	Priority   int32              `json:"priority,omitempty"`
	LeaseMS    int64              `json:"lease_ms"`
	Retry      domain.RetryPolicy `json:"retry"`
	RevertType string             `json:"revert_type,omitempty"`
	SpawnedBy  string             `json:"spawned_by,omitempty"`

	State        domain.TaskState `json:"state"`
	Attempt      int              `json:"attempt"`
	FencingToken uint64           `json:"fencing_token,omitempty"`
	LeaseOwner   string           `json:"lease_owner,omitempty"`
	// LeaseRequest is the claim request id the lease was granted to (empty
	// for a claim without one): a re-sent claim with the same id gets this
	// lease back instead of a new one (see claimReqKey).
	LeaseRequest   string          `json:"lease_request,omitempty"`
	LeaseExpiresAt int64           `json:"lease_expires_at,omitempty"`
	ReadySeq       uint64          `json:"ready_seq,omitempty"`
	ReadyAt        int64           `json:"ready_at,omitempty"`
	RetryAt        int64           `json:"retry_at,omitempty"`
	StartedAt      int64           `json:"started_at,omitempty"`
	FinishedAt     int64           `json:"finished_at,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          string          `json:"error,omitempty"`
	Reused         bool            `json:"reused,omitempty"`
	Indexed        bool            `json:"indexed,omitempty"` // in the ready index
	Attempts       []Attempt       `json:"attempts,omitempty"`
	// Unacked counts the forward leases that expired before their worker
	// acknowledged the claim and were not counted as attempts (at most
	// domain.MaxUnackedExpiries; later ones count).
	Unacked int           `json:"unacked,omitempty"`
	Comp    *Compensation `json:"compensation,omitempty"`

	// TimeoutMS, ScheduleToStartMS and Signal are the spec's (see
	// domain.TaskSpec). TimeoutAt is the live attempt's deadline (its lease
	// never extends past it), or a wait task's; DueAt is the timer of a
	// ready task (a wait task's timeout, or schedule_to_start) in the
	// wake-up index. SignalID is the signal that completed a wait task.
	TimeoutMS         int64  `json:"timeout_ms,omitempty"`
	ScheduleToStartMS int64  `json:"schedule_to_start_ms,omitempty"`
	Signal            string `json:"signal,omitempty"`
	TimeoutAt         int64  `json:"timeout_at,omitempty"`
	DueAt             int64  `json:"due_at,omitempty"`
	SignalID          string `json:"signal_id,omitempty"`
	// ScheduleToStartPolicy is the spec's ("" = fail); Late is set when a
	// task with policy alert stayed ready past schedule_to_start_ms (once
	// per task; it stays set).
	ScheduleToStartPolicy string `json:"schedule_to_start_policy,omitempty"`
	Late                  bool   `json:"late,omitempty"`

	CreateIndex uint64 `json:"create_index"`
	ModifyIndex uint64 `json:"modify_index"`
}

// ID is the task's protocol id: "<run id>/<key>".
func (t *Task) ID() string { return t.RunID + "/" + t.Key }

// Leased reports whether a worker holds a lease on the task (a forward
// attempt or a compensation).
func (t *Task) Leased() bool {
	return t.State == domain.TaskRunning || (t.State == domain.TaskReverting && t.Comp != nil && t.Comp.Phase == CompRunning)
}

// Attempt outcomes.
const (
	OutcomeRunning      = "running"
	OutcomeSucceeded    = "succeeded"
	OutcomeFailed       = "failed"
	OutcomeLeaseExpired = "lease_expired"
	// OutcomeLeaseUnacked: the lease expired before the worker acknowledged
	// the claim (no heartbeat, complete or fail with its token). The attempt
	// is not counted: the task went back to ready at once and its next
	// claim carries the same attempt number.
	OutcomeLeaseUnacked = "lease_unacked"
	// OutcomeTimedOut: the attempt ran past the task's timeout_ms.
	OutcomeTimedOut  = "timed_out"
	OutcomeCancelled = "cancelled" // lease revoked by cancel
	OutcomeRevoked   = "revoked"   // lease revoked by revert
)

// Attempt is one claim of a task by a worker: a forward attempt or, with
// Compensation set, a run of its revert handler.
type Attempt struct {
	N         int    `json:"n"`
	Worker    string `json:"worker"`
	Token     uint64 `json:"token"`
	ClaimedAt int64  `json:"claimed_at"`
	EndedAt   int64  `json:"ended_at,omitempty"`
	// AckedAt is when the worker first acknowledged the claim: its first
	// accepted heartbeat, or the complete/fail that ended the attempt.
	// 0 while unacknowledged.
	AckedAt      int64  `json:"acked_at,omitempty"`
	Outcome      string `json:"outcome"`
	Error        string `json:"error,omitempty"`
	Compensation bool   `json:"compensation,omitempty"`
	// The attempt's log (apply_logs.go): lines received (the next line
	// number), lines and bytes stored, chunk keys written. All zero, and
	// absent from the record, when the attempt logged nothing.
	LogLines  int `json:"log_lines,omitempty"`
	LogStored int `json:"log_stored,omitempty"`
	LogBytes  int `json:"log_bytes,omitempty"`
	LogChunks int `json:"log_chunks,omitempty"`
}

// acked reports whether the worker acknowledged t's live lease.
func (t *Task) acked() bool {
	n := len(t.Attempts)
	return n > 0 && t.Attempts[n-1].Outcome == OutcomeRunning && t.Attempts[n-1].AckedAt != 0
}

// ack marks t's live lease as acknowledged by its worker at now.
func (t *Task) ack(now int64) {
	if n := len(t.Attempts); n > 0 && t.Attempts[n-1].Outcome == OutcomeRunning && t.Attempts[n-1].AckedAt == 0 {
		t.Attempts[n-1].AckedAt = max(now, 1)
	}
}

// Compensation phases of a reverting task.
const (
	CompWaiting  = "waiting"  // dependents' compensations not finished yet
	CompReady    = "ready"    // in the ready index under its revert_type
	CompRunning  = "running"  // leased to a worker
	CompRetrying = "retrying" // failed, waiting for its backoff
)

// Compensation tracks the revert handler of a reverting task.
type Compensation struct {
	Phase   string `json:"phase"`
	Attempt int    `json:"attempt"`
	RetryAt int64  `json:"retry_at,omitempty"`
	Error   string `json:"error,omitempty"`
	// Unacked counts compensation leases that expired unacknowledged and
	// were not counted (see Task.Unacked).
	Unacked int `json:"unacked,omitempty"`
}

// QueueState is the replicated configuration and live counts of a queue.
type QueueState struct {
	Name        string `json:"name"`
	Ready       int    `json:"ready"`
	Running     int    `json:"running"`
	Concurrency int    `json:"concurrency"` // 0 = unlimited
	Paused      bool   `json:"paused"`
	// Auto, when set, makes Concurrency the effective cap the leader's
	// controller adjusts within its bounds (apply_autoconc.go).
	Auto *domain.AutoConcurrency `json:"auto,omitempty"`
	// Types counts ready (indexed) tasks per dispatch type.
	Types map[string]int `json:"types,omitempty"`
	// PausedRuns lists the runs this queue is paused for.
	PausedRuns []string `json:"paused_runs,omitempty"`
	// Limit is the queue's rate limit and TypeLimits those of task types
	// within it (apply_ratelimit.go); nil: none.
	Limit      *domain.RateLimit            `json:"limit,omitempty"`
	TypeLimits map[string]*domain.RateLimit `json:"type_limits,omitempty"`
	// Leased counts the leases the queue granted (its current rate is the
	// counter's rate); Throttled the claims that found its ready work held
	// back by a rate limit.
	Leased    uint64 `json:"leased,omitempty"`
	Throttled uint64 `json:"throttled,omitempty"`
}

// Dispatching reports whether the queue may hand out a task now: not
// paused, something ready, below its cap.
func (q *QueueState) Dispatching() bool {
	return q != nil && !q.Paused && q.Ready > 0 && (q.Concurrency == 0 || q.Running < q.Concurrency)
}

// Breaker states.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half_open"
)

// Breaker is the circuit breaker of one task type.
type Breaker struct {
	Type     string `json:"type"`
	State    string `json:"state"`
	Failures int    `json:"failures"` // consecutive
	OpenedAt int64  `json:"opened_at,omitempty"`
	// Trial is the task dispatched while half-open; no other is until it ends.
	Trial string `json:"trial,omitempty"`
}

// Allows reports whether a task of the breaker's type may be dispatched at
// time now: closed; open but cooled down (the claim half-opens it); or
// half-open with no trial out.
func (b *Breaker) Allows(now, cooldown int64) bool {
	switch b.State {
	case BreakerOpen:
		return now >= b.OpenedAt+cooldown
	case BreakerHalfOpen:
		return b.Trial == ""
	}
	return true
}

// Settings are cluster-wide knobs, replicated.
type Settings struct {
	MaxRunningRuns    int   `json:"max_running_runs"`    // 0 = unlimited
	RetentionMS       int64 `json:"retention_ms"`        // 0 = default (7 days)
	BreakerFailures   int   `json:"breaker_failures"`    // 0 = default (5); <0 disables
	BreakerCooldownMS int64 `json:"breaker_cooldown_ms"` // 0 = default (30 s)
	EventWindow       int   `json:"event_window"`        // 0 = default (100000)
	// DefaultMaxAttempts is max_attempts for a task that sets none (0 =
	// domain.DefaultMaxAttempts, 1), applied when the run is submitted.
	DefaultMaxAttempts int `json:"default_max_attempts,omitempty"`
}

// Defaults for zero settings.
const (
	DefaultRetentionMS       = 7 * 24 * 3600 * 1000
	DefaultBreakerFailures   = 5
	DefaultBreakerCooldownMS = 30_000
	DefaultEventWindow       = 100_000
)

// Effective returns the settings with every zero replaced by its default.
func (s Settings) Effective() Settings {
	s.RetentionMS = s.retention()
	s.BreakerFailures = s.breakerFailures()
	s.BreakerCooldownMS = s.breakerCooldown()
	s.EventWindow = s.eventWindow()
	return s
}

func (s Settings) retention() int64 {
	if s.RetentionMS > 0 {
		return s.RetentionMS
	}
	return DefaultRetentionMS
}

func (s Settings) breakerFailures() int {
	if s.BreakerFailures == 0 {
		return DefaultBreakerFailures
	}
	return s.BreakerFailures
}

func (s Settings) breakerCooldown() int64 {
	if s.BreakerCooldownMS > 0 {
		return s.BreakerCooldownMS
	}
	return DefaultBreakerCooldownMS
}

func (s Settings) eventWindow() int {
	if s.EventWindow > 0 {
		return s.EventWindow
	}
	return DefaultEventWindow
}

// Counters are cluster-wide running totals kept by Apply.
type Counters struct {
	ActiveRuns int `json:"active_runs"` // running, interrupted or reverting
	Events     int `json:"events"`      // events in the window
	// TrimmedThrough is the last entry whose events left the window.
	TrimmedThrough uint64 `json:"trimmed_through,omitempty"`
	NextAdmit      uint64 `json:"next_admit"`
	LeaseExpiries  uint64 `json:"lease_expiries"`
	// LeaseUnacked counts the expiries (included in LeaseExpiries) that
	// were not counted as attempts: the worker never acknowledged.
	LeaseUnacked uint64 `json:"lease_unacked,omitempty"`
	TasksDone    uint64 `json:"tasks_done"`
}

// Event is one applied transition. Events are ordered by (Index, Seq).
type Event struct {
	Index      uint64 `json:"index"`
	Seq        uint32 `json:"seq"`
	Kind       string `json:"kind"` // run | task | breaker | queue | settings
	RunID      string `json:"run_id,omitempty"`
	TaskKey    string `json:"task_key,omitempty"`
	Name       string `json:"name,omitempty"` // queue or task type for breaker/queue events
	Transition string `json:"transition"`
	From       string `json:"from,omitempty"`
	To         string `json:"to,omitempty"`
	At         int64  `json:"at"`
	Attempt    int    `json:"attempt,omitempty"`
	Worker     string `json:"worker,omitempty"`
	Queue      string `json:"queue,omitempty"`
	Type       string `json:"type,omitempty"`
	Error      string `json:"error,omitempty"`
	// Since, Outcome and Workflow are not stored (json "-"): they reach
	// only the events a commit publishes (LastEvents, the commit hook), for
	// the leader's histograms. On a task's claim, Since is when it became
	// ready; on the edge that ends an attempt, when the attempt was claimed,
	// and Outcome is the attempt's; on a run's edge into a done state, when
	// the run started (or was created, if it never started), and Workflow
	// is its workflow's name.
	Since    int64  `json:"-"`
	Outcome  string `json:"-"`
	Workflow string `json:"-"`
}
