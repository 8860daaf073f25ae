package rpc

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// ProtocolVersion is bumped only on incompatible changes. Clients call
// agent.hello at connect and fail fast on a mismatch.
const ProtocolVersion = 1

// NotifyEvent is the server notification of events.subscribe. (The method
// names are in methodtable.go.)
const NotifyEvent = "event"

// HelloParams opens a session.
type HelloParams struct {
	ProtocolVersion int    `json:"protocol_version"`
	Client          string `json:"client,omitempty"`
}

// HelloResult identifies the agent. LeaderID is the leader as this agent
// knows it ("" when none is known, or from an agent older than the field):
// a client that knows which endpoint serves that node sends writes there.
type HelloResult struct {
	ProtocolVersion int    `json:"protocol_version"`
	NodeID          string `json:"node_id"`
	LeaderID        string `json:"leader_id"`
	Version         string `json:"version"`
}

// SubmitParams of run.submit. Workflow is decoded by the server so every
// spec problem is reported with its path.
type SubmitParams struct {
	Workflow json.RawMessage   `json:"workflow"`
	ID       string            `json:"id,omitempty"`
	Input    json.RawMessage   `json:"input,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	IfFull   string            `json:"if_full,omitempty"`
	// Nonce identifies this call; its retries send the same one. A retry of
	// the call that created the run is answered created:true, another call
	// with the same id created:false. Optional: the agent that receives a
	// call without one picks one, so its own forwarding retries are
	// answered right.
	Nonce string `json:"nonce,omitempty"`
	// StartAt (RFC 3339) or DelayMS delays the run's start: it stays
	// pending ("scheduled") until then. At most one of the two.
	StartAt string `json:"start_at,omitempty"`
	DelayMS int64  `json:"delay_ms,omitempty"`
	// Definition runs a stored workflow definition instead of an inline
	// workflow: "name" (its latest version when the submit is applied) or
	// "name@version". Exactly one of Workflow and Definition.
	Definition string `json:"definition,omitempty"`
}

// SubmitResult of run.submit and run.replay.
type SubmitResult struct {
	ID      string          `json:"id"`
	State   domain.RunState `json:"state"`
	Created bool            `json:"created"`
	Index   uint64          `json:"index,omitempty"`
}

// IDParams names a run (full id, or a unique prefix or substring).
type IDParams struct {
	ID         string `json:"id"`
	Consistent bool   `json:"consistent,omitempty"`
}

// VerbParams of run.cancel, run.interrupt, run.resume, run.revert.
type VerbParams struct {
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

// ChangedResult answers verbs; false is a lost race, not an error.
type ChangedResult struct {
	Changed bool   `json:"changed"`
	Index   uint64 `json:"index,omitempty"`
}

// Run is the protocol view of a run.
type Run struct {
	ID         string          `json:"id"`
	Workflow   string          `json:"workflow"`
	State      domain.RunState `json:"state"`
	OnFailure  string          `json:"on_failure,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	StartedAt  time.Time       `json:"started_at,omitzero"`
	FinishedAt time.Time       `json:"finished_at,omitzero"`
	ParentID   string          `json:"parent_id,omitempty"`
	ReplayOf   string          `json:"replay_of,omitempty"`
	// Children: the child runs the run's tasks of type run started, by
	// task key (run.get only; a child run's parent_id is this run).
	Children     map[string]string `json:"children,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Input        json.RawMessage   `json:"input,omitempty"`
	Reason       string            `json:"reason,omitempty"`
	PausedQueues []string          `json:"paused_queues,omitempty"`
	Counts       map[string]int    `json:"counts"`
	TaskCount    int               `json:"task_count"`
	Done         int               `json:"done"` // tasks in a done state
	Tasks        []Task            `json:"tasks,omitempty"`
	Spec         *domain.Spec      `json:"spec,omitempty"`
	ModifyIndex  uint64            `json:"modify_index"`
	// Scheduled: pending until StartAt (a delayed start). DeadlineAt: when
	// the run passes its deadline_ms (set once it started).
	Scheduled  bool      `json:"scheduled,omitempty"`
	StartAt    time.Time `json:"start_at,omitzero"`
	DeadlineMS int64     `json:"deadline_ms,omitempty"`
	DeadlineAt time.Time `json:"deadline_at,omitzero"`
	// Definition and DefinitionVersion: the stored definition the run was
	// submitted by (absent for an inline workflow).
	Definition        string `json:"definition,omitempty"`
	DefinitionVersion int    `json:"definition_version,omitempty"`
	// WaitingForWorker lists the task types of the run's ready tasks that
	// no worker has claimed for (in the task's queue) within the leader's
	// --idle-type-after. Read-side, not replicated: computed from the
	// leader's worker registry (a follower asks the leader, cached ~1 s).
	// Only run.get sets it. WaitingForWorkerNote says why it is absent when
	// it could not be computed (no leader reachable, or a new leader still
	// learning its workers).
	WaitingForWorker     []string `json:"waiting_for_worker,omitempty"`
	WaitingForWorkerNote string   `json:"waiting_for_worker_note,omitempty"`
	// WaitingOn says why the run, or some of its tasks, is not running:
	// the run's own reason first (a delayed start, admission, interrupted),
	// then each distinct task reason (run.get only; computed when read).
	WaitingOn []WaitingOn `json:"waiting_on,omitempty"`
}

// WaitingOn is why a run or task that could run is not running now, and
// what lifts it (computed when read, never stored).
type WaitingOn struct {
	// Reason: start_at, admission, run_interrupted, run_paused,
	// queue_paused, breaker_open, breaker_trial, concurrency, rate_limit,
	// retry_backoff, no_worker.
	Reason string `json:"reason"`
	// Message says it in a sentence; Command is the command that lifts it
	// (absent when only time does); Until is when it lifts by itself.
	Message string    `json:"message"`
	Command string    `json:"command,omitempty"`
	Until   time.Time `json:"until,omitzero"`
	// Queue and Type: the queue and task type it concerns (task reasons).
	Queue string `json:"queue,omitempty"`
	Type  string `json:"type,omitempty"`
}

// Task is the protocol view of a task run.
type Task struct {
	ID             string           `json:"id"`
	RunID          string           `json:"run_id"`
	Key            string           `json:"key"`
	Type           string           `json:"type"`
	Queue          string           `json:"queue"`
	State          domain.TaskState `json:"state"`
	Attempt        int              `json:"attempt"`
	MaxAttempts    int              `json:"max_attempts"`
	FencingToken   uint64           `json:"fencing_token"`
	LeaseOwner     string           `json:"lease_owner,omitempty"`
	LeaseExpiresAt time.Time        `json:"lease_expires_at,omitzero"`
	// Worker is the worker of the latest attempt (the lease owner while
	// running, the last one to run it afterwards).
	Worker       string          `json:"worker,omitempty"`
	ReadyAt      time.Time       `json:"ready_at,omitzero"`
	RetryAt      time.Time       `json:"retry_at,omitzero"`
	StartedAt    time.Time       `json:"started_at,omitzero"`
	FinishedAt   time.Time       `json:"finished_at,omitzero"`
	Priority     int32           `json:"priority,omitempty"`
	RevertType   string          `json:"revert_type,omitempty"`
	SpawnedBy    string          `json:"spawned_by,omitempty"`
	Deps         []string        `json:"deps"`
	Input        json.RawMessage `json:"input,omitempty"`
	Result       json.RawMessage `json:"result,omitempty"`
	Error        string          `json:"error,omitempty"`
	Reused       bool            `json:"reused,omitempty"`
	Compensation *Compensation   `json:"compensation,omitempty"`
	Attempts     []Attempt       `json:"attempts,omitempty"`
	// NotBefore: a retrying task is not ready before it (its backoff).
	NotBefore time.Time `json:"not_before,omitzero"`
	// TimeoutMS and ScheduleToStartMS are the spec's; DeadlineAt is when
	// the live attempt times out, or a waiting task's wait or a ready
	// task's schedule_to_start ends.
	TimeoutMS         int64     `json:"timeout_ms,omitempty"`
	ScheduleToStartMS int64     `json:"schedule_to_start_ms,omitempty"`
	DeadlineAt        time.Time `json:"deadline_at,omitzero"`
	// Waiting: a wait task waiting for its signal (Signal, the name
	// run.signal reaches it by). SignalID: the signal that completed it.
	Waiting  bool   `json:"waiting,omitempty"`
	Signal   string `json:"signal,omitempty"`
	SignalID string `json:"signal_id,omitempty"`
	// ScheduleToStartPolicy is the spec's ("fail" when omitted); Late: the
	// task has policy alert and stayed ready past schedule_to_start_ms
	// without a claim (it stays set once raised).
	ScheduleToStartPolicy string `json:"schedule_to_start_policy,omitempty"`
	Late                  bool   `json:"late,omitempty"`
	// When and Trigger are the spec's condition and trigger rule (run.get
	// only; docs/workflows.md). A task they decided against is skipped, its
	// Error saying why.
	When    string `json:"when,omitempty"`
	Trigger string `json:"trigger,omitempty"`
	// Finally: one of the run's finally tasks (run.get only).
	Finally bool `json:"finally,omitempty"`
	// ChildRun: the child run a task of type run started (run.get only).
	ChildRun string `json:"child_run,omitempty"`
	// WaitingOn: why the task, which could run, is not running now
	// (run.get and task.get; computed when read).
	WaitingOn *WaitingOn `json:"waiting_on,omitempty"`
	// Retry is the retry policy in force (max_attempts and backoff, the
	// defaults filled in).
	Retry *domain.RetryPolicy `json:"retry,omitempty"`
}

// Compensation is a reverting task's revert handler status.
type Compensation struct {
	Phase   string    `json:"phase"`
	Attempt int       `json:"attempt"`
	RetryAt time.Time `json:"retry_at,omitzero"`
	Error   string    `json:"error,omitempty"`
}

// Attempt is one claim of a task.
type Attempt struct {
	N            int       `json:"n"`
	Worker       string    `json:"worker"`
	FencingToken uint64    `json:"fencing_token"`
	ClaimedAt    time.Time `json:"claimed_at"`
	EndedAt      time.Time `json:"ended_at,omitzero"`
	// AckedAt is when the worker acknowledged the claim (its first
	// heartbeat, complete or fail); absent: never (an expiry then spends
	// no attempt, outcome lease_unacked).
	AckedAt      time.Time `json:"acked_at,omitzero"`
	Outcome      string    `json:"outcome"`
	Error        string    `json:"error,omitempty"`
	Compensation bool      `json:"compensation,omitempty"`
}

// ListParams of run.list.
type ListParams struct {
	State      domain.RunState `json:"state,omitempty"`
	Limit      int             `json:"limit,omitempty"`
	Cursor     string          `json:"cursor,omitempty"`
	Consistent bool            `json:"consistent,omitempty"`
	// Filters, applied by the agent: every label pair must match; the
	// workflow (spec name); created strictly after / before. A page may
	// hold fewer runs than limit and still have a next_cursor: the agent
	// examines a bounded number of runs per page; keep paging.
	Labels map[string]string `json:"labels,omitempty"`
	// Selector: a label selector, "env=prod,team!=data" (terms k=v, k==v,
	// k!=v, k, !k; all must hold), ANDed with labels.
	Selector      string    `json:"selector,omitempty"`
	Workflow      string    `json:"workflow,omitempty"`
	CreatedAfter  time.Time `json:"created_after,omitzero"`
	CreatedBefore time.Time `json:"created_before,omitzero"`
	// Definition: runs submitted by this definition, "name" (any version)
	// or "name@version".
	Definition string `json:"definition,omitempty"`
}

// ListResult of run.list. Runs carry no tasks.
type ListResult struct {
	Runs       []Run          `json:"runs"`
	NextCursor string         `json:"next_cursor,omitempty"`
	Counts     map[string]int `json:"counts"` // runs per state
}

// WaitParams of run.wait.
type WaitParams struct {
	ID        string `json:"id"`
	TimeoutMS int64  `json:"timeout_ms"`
}

// WaitResult of run.wait.
type WaitResult struct {
	Done bool `json:"done"`
	Run  Run  `json:"run"`
}

// ReplayParams of run.replay.
type ReplayParams struct {
	ID             string          `json:"id"`
	NewID          string          `json:"new_id,omitempty"`
	Input          json.RawMessage `json:"input,omitempty"`
	ReuseSucceeded bool            `json:"reuse_succeeded,omitempty"`
}

// RunStats of run.stats.
type RunStats struct {
	ID       string         `json:"id"`
	State    string         `json:"state"`
	Counts   map[string]int `json:"counts"`
	Attempts int            `json:"attempts"`
	Retries  int            `json:"retries"`
	// Durations in milliseconds.
	RunMS int64       `json:"run_ms"`
	Tasks []TaskStats `json:"tasks"`
}

// TaskStats is one task's timing.
type TaskStats struct {
	Key         string `json:"key"`
	State       string `json:"state"`
	Attempts    int    `json:"attempts"`
	QueueWaitMS int64  `json:"queue_wait_ms"`
	RunMS       int64  `json:"run_ms"`
}

// TaskIDParams names a task "<run id>/<key>".
type TaskIDParams struct {
	ID string `json:"id"`
}

// ClaimParams of task.claim.
type ClaimParams struct {
	WorkerID string   `json:"worker_id"`
	Queues   []string `json:"queues,omitempty"`
	Types    []string `json:"types,omitempty"`
	Max      int      `json:"max,omitempty"`
	WaitMS   int64    `json:"wait_ms,omitempty"`
	// RequestID makes the claim idempotent: a claim re-sent with the same
	// worker_id and request_id (after a lost answer) gets the tasks the
	// first one leased, with the same tokens, while they are still leased
	// to it, and leases nothing more. Send a fresh one per claim and the
	// same one on its retries. Optional: the agent that receives a claim
	// without one picks one, so its own forwarding retries are safe.
	RequestID string `json:"request_id,omitempty"`
	// Slots is the worker's total task slots (its concurrency), shown by
	// workers.list; optional, informational (Max is what it asks for now).
	Slots int `json:"slots,omitempty"`
}

// Claimed is a task handed to a worker.
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
	LeaseExpiresAt time.Time                  `json:"lease_expires_at"`
	DepResults     map[string]json.RawMessage `json:"dep_results"`
	Compensation   bool                       `json:"compensation,omitempty"`
	Result         json.RawMessage            `json:"result,omitempty"`
	// TimeoutMS: the attempt's timeout_ms (0 = none); DeadlineAt the leader
	// time it ends at. The lease is never renewed past it; the SDK cancels
	// the handler's context TimeoutMS after it received the task.
	TimeoutMS  int64     `json:"timeout_ms,omitempty"`
	DeadlineAt time.Time `json:"deadline_at,omitzero"`
}

// ClaimResult of task.claim.
type ClaimResult struct {
	Tasks []Claimed `json:"tasks"`
}

// HeartbeatParams of task.heartbeat.
type HeartbeatParams struct {
	TaskID       string `json:"task_id"`
	FencingToken uint64 `json:"fencing_token"`
	LogParams
}

// AckResult of heartbeat, complete and fail; false is a lost race.
type AckResult struct {
	Accepted       bool      `json:"accepted"`
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`
	Index          uint64    `json:"index,omitempty"`
	// Tasks: what task.complete's claim leased (absent when it asked for
	// none or none was ready).
	Tasks []Claimed `json:"tasks,omitempty"`
}

// WriteIndex is the raft index of the entry that carried a write; an agent
// that forwarded the write makes its later local reads wait until it
// applied that index, so a client reading from the same agent sees its
// own write.
func (r AckResult) WriteIndex() uint64 { return r.Index }

// WriteIndex implements the read-your-writes contract (see AckResult).
func (r SubmitResult) WriteIndex() uint64 { return r.Index }

// WriteIndex implements the read-your-writes contract (see AckResult).
func (r ChangedResult) WriteIndex() uint64 { return r.Index }

// WriteIndex is the newest lease's token (a claim's token is its entry's
// index): an agent that forwarded the claim then reads its own leases.
func (r ClaimResult) WriteIndex() uint64 {
	var idx uint64
	for _, t := range r.Tasks {
		idx = max(idx, t.FencingToken)
	}
	return idx
}

// WriteIndex makes an agent that forwarded run.wait catch up to the state
// the leader saw before answering (see AckResult).
func (r WaitResult) WriteIndex() uint64 { return r.Run.ModifyIndex }

// CompleteParams of task.complete.
type CompleteParams struct {
	TaskID       string            `json:"task_id"`
	FencingToken uint64            `json:"fencing_token"`
	Result       json.RawMessage   `json:"result,omitempty"`
	Spawn        []json.RawMessage `json:"spawn,omitempty"`
	// Claim, if set, also claims up to Claim.Max ready tasks for
	// Claim.WorkerID in the same raft entry (no waiting: wait_ms must be 0),
	// answered in AckResult.Tasks. Not idempotent: after an unknown outcome
	// retry the completion without it.
	Claim *ClaimParams `json:"claim,omitempty"`
	LogParams
}

// FailParams of task.fail.
type FailParams struct {
	TaskID       string `json:"task_id"`
	FencingToken uint64 `json:"fencing_token"`
	Error        string `json:"error"`
	Retryable    *bool  `json:"retryable,omitempty"`
	LogParams
}

// Peer is a member of the raft configuration.
type Peer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
	State    string `json:"state,omitempty"` // leader | follower | unknown
	// Member is what the peer reported of itself (operator.raft.list_peers
	// asks each one; nil when it did not answer).
	Member *MemberVersion `json:"member,omitempty"`
}

// ClusterStatus of cluster.status.
type ClusterStatus struct {
	NodeID       string `json:"node_id"`
	LeaderID     string `json:"leader_id"`
	State        string `json:"state"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	LastContact  string `json:"last_contact,omitempty"`
	Peers        []Peer `json:"peers"`
	Version      string `json:"version,omitempty"`
	PID          int    `json:"pid,omitempty"` // the agent's process id on its machine
	// FSMVersion: the active state-machine version and this binary's range.
	FSMVersion *FSMVersion `json:"fsm_version,omitempty"`
}

// ClusterStats of cluster.stats.
type ClusterStats struct {
	Runs           map[string]int `json:"runs"`
	TasksPerSecond float64        `json:"tasks_per_second"` // over the last minute
	Queues         map[string]int `json:"queues"`           // ready per queue
	Running        int            `json:"running"`
	LeaseExpiries  uint64         `json:"lease_expiries"`
	TasksDone      uint64         `json:"tasks_done"`
	AppliedIndex   uint64         `json:"applied_index"`
}

// DigestResult of cluster.digest.
type DigestResult struct {
	Digest       string `json:"digest"`
	AppliedIndex uint64 `json:"applied_index"`
}

// SubscribeParams of events.subscribe.
type SubscribeParams struct {
	RunID     string `json:"run_id,omitempty"`
	FromIndex uint64 `json:"from_index,omitempty"`
}

// SubscribeResult of events.subscribe.
type SubscribeResult struct {
	Subscription string `json:"subscription"`
	// FromIndex is where the stream starts (the requested index, or the
	// next index to be applied when none was given).
	FromIndex uint64 `json:"from_index"`
}

// Event is one applied transition (also the params of the "event"
// notification, plus the subscription id).
type Event struct {
	Subscription string    `json:"subscription,omitempty"`
	Index        uint64    `json:"index"`
	Seq          uint32    `json:"seq"`
	Kind         string    `json:"kind"`
	RunID        string    `json:"run_id,omitempty"`
	TaskKey      string    `json:"task_key,omitempty"`
	Name         string    `json:"name,omitempty"`
	Transition   string    `json:"transition"`
	From         string    `json:"from,omitempty"`
	To           string    `json:"to,omitempty"`
	At           time.Time `json:"at"`
	Attempt      int       `json:"attempt,omitempty"`
	Worker       string    `json:"worker,omitempty"`
	Queue        string    `json:"queue,omitempty"`
	Type         string    `json:"type,omitempty"`
	Error        string    `json:"error,omitempty"`
}

// EventsListParams of events.list. With Latest, the newest Limit events
// are returned (in order) and FromIndex is ignored.
type EventsListParams struct {
	FromIndex uint64 `json:"from_index,omitempty"`
	RunID     string `json:"run_id,omitempty"`
	Limit     int    `json:"limit,omitempty"`
	Latest    bool   `json:"latest,omitempty"`
}

// EventsListResult of events.list.
type EventsListResult struct {
	Events      []Event `json:"events"`
	OldestIndex uint64  `json:"oldest_index"`
}

// Breaker is a task type's circuit breaker.
type Breaker struct {
	Type     string    `json:"type"`
	State    string    `json:"state"`
	Failures int       `json:"failures"`
	OpenedAt time.Time `json:"opened_at,omitzero"`
}

// Queue is one queue in queue.list.
type Queue struct {
	Name        string   `json:"name"`
	Ready       int      `json:"ready"`
	Running     int      `json:"running"`
	Concurrency int      `json:"concurrency"`
	Paused      bool     `json:"paused"`
	PausedRuns  []string `json:"paused_runs,omitempty"`
	// PausedReady counts ready tasks held back by a pause for their run
	// (paused_runs); ready does not count them (no worker can claim them).
	PausedReady   int            `json:"paused_ready,omitempty"`
	OldestReadyMS int64          `json:"oldest_ready_ms"`
	Types         map[string]int `json:"types,omitempty"`
	Breakers      []Breaker      `json:"breakers"`
	// RateLimit is the queue's token bucket and TypeLimits those of task
	// types in it (absent: none); Leased counts the leases the queue
	// granted (its rate over time is the current rate), Throttled the claims
	// that found its ready work held back by a limit.
	RateLimit  *RateLimit           `json:"rate_limit,omitempty"`
	TypeLimits map[string]RateLimit `json:"type_limits,omitempty"`
	Leased     uint64               `json:"leased"`
	Throttled  uint64               `json:"throttled"`
	// Auto is set when the queue's concurrency is auto; Concurrency is then
	// the effective cap the leader set.
	Auto *QueueAuto `json:"auto,omitempty"`
}

// QueueListResult of queue.list.
type QueueListResult struct {
	Queues   []Queue   `json:"queues"`
	Breakers []Breaker `json:"breakers"` // every breaker that ever changed
}

// QueuePauseParams of queue.pause and queue.resume.
type QueuePauseParams struct {
	Name  string `json:"name"`
	RunID string `json:"run_id,omitempty"`
}

// QueueDeleteParams of queue.delete.
type QueueDeleteParams struct {
	Name string `json:"name"`
}

// QueueSetParams of queue.set.
type QueueSetParams struct {
	Name        string `json:"name"`
	Concurrency int    `json:"concurrency"`
	// Rate (tasks per second; 0 removes the limit) and Burst (0 = 1) set
	// the queue's rate limit, or with Type the limit of that task type's
	// tasks in the queue. A call with rate changes the concurrency cap only
	// when concurrency is non-zero.
	Rate  *float64 `json:"rate,omitempty"`
	Burst int      `json:"burst,omitempty"`
	Type  string   `json:"type,omitempty"`
	// Auto is `"concurrency": "auto"` (autoconc.go): the leader adjusts the
	// cap between Min and Max from completion latency against
	// TargetLatencyMS (0: 1000). A number for concurrency turns it off.
	Auto            bool  `json:"-"`
	Min             int   `json:"min,omitempty"`
	Max             int   `json:"max,omitempty"`
	TargetLatencyMS int64 `json:"target_latency_ms,omitempty"`
}

// Settings of settings.get / settings.set (set: only given fields change).
type Settings struct {
	MaxRunningRuns    *int   `json:"max_running_runs,omitempty"`
	RetentionMS       *int64 `json:"retention_ms,omitempty"`
	BreakerFailures   *int   `json:"breaker_failures,omitempty"`
	BreakerCooldownMS *int64 `json:"breaker_cooldown_ms,omitempty"`
	EventWindow       *int   `json:"event_window,omitempty"`
	// DefaultMaxAttempts is max_attempts for tasks that set none, applied
	// at submit (0 = 1, the protocol's default).
	DefaultMaxAttempts *int `json:"default_max_attempts,omitempty"`
}

// Worker is a worker the leader has seen recently (workers.list).
type Worker struct {
	ID            string    `json:"id"`
	Queues        []string  `json:"queues,omitempty"`
	Types         []string  `json:"types,omitempty"`
	InFlight      int       `json:"in_flight"`
	Waiting       bool      `json:"waiting"`
	LastSeen      time.Time `json:"last_seen"`
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
	// LastClaim is when it last asked for tasks (a long poll or a
	// completion that claims the next); Slots its total task slots as it
	// reported them (absent if it did not).
	LastClaim time.Time `json:"last_claim,omitzero"`
	Slots     int       `json:"slots,omitempty"`
	Node      string    `json:"node,omitempty"`
}

// WorkersResult of workers.list.
type WorkersResult struct {
	Workers []Worker `json:"workers"`
	// Served are the (queues, types) filters of the workers in contact
	// (claiming, or holding a task and heartbeating) within IdleTypeAfterMS,
	// the leader's --idle-type-after; an empty list in a filter means every
	// queue or type. ServedKnown is false while the leader has led for less
	// than that (a worker may simply not have claimed from it yet): then no
	// type counts as unserved.
	Served          []ServedFilter `json:"served,omitempty"`
	ServedKnown     bool           `json:"served_known"`
	IdleTypeAfterMS int64          `json:"idle_type_after_ms,omitempty"`
}

// ServedFilter is what one or more live workers claim: tasks of Types in
// Queues (empty: any).
type ServedFilter struct {
	Queues []string `json:"queues,omitempty"`
	Types  []string `json:"types,omitempty"`
}

// Serves reports whether a worker claiming with f takes a task of typ in
// queue.
func (f ServedFilter) Serves(queue, typ string) bool {
	return (len(f.Queues) == 0 || slices.Contains(f.Queues, queue)) && (len(f.Types) == 0 || slices.Contains(f.Types, typ))
}

// PeerParams of operator.raft.add_peer / remove_peer / transfer_leadership.
type PeerParams struct {
	ID      string `json:"id,omitempty"`
	Address string `json:"address,omitempty"`
}

// PeersResult of operator.raft.list_peers.
type PeersResult struct {
	Peers []Peer `json:"peers"`
}

// SnapshotParams of snapshot.save / snapshot.restore. Path is a file name
// in the agent's --snapshot-dir. save runs on the connected agent unless
// Leader or Node says otherwise; with Stream it writes no named file and
// answers a transfer to read (snapshot.read). restore runs on the leader
// and reads Path, or installs the upload Transfer once its Bytes and
// SHA256 match what was received.
type SnapshotParams struct {
	Path   string `json:"path,omitempty"`
	Leader bool   `json:"leader,omitempty"`
	Node   string `json:"node,omitempty"`
	Stream bool   `json:"stream,omitempty"`
	// Transfer, Bytes and SHA256 (hex) name and check an upload
	// (snapshot.upload) for restore.
	Transfer string `json:"transfer,omitempty"`
	Bytes    int64  `json:"bytes,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
}

// SnapshotResult of snapshot.save / snapshot.restore.
type SnapshotResult struct {
	Path         string `json:"path"`
	Bytes        int64  `json:"bytes"`
	AppliedIndex uint64 `json:"applied_index"`
	// Node is the agent that wrote (or restored) the snapshot.
	Node string `json:"node,omitempty"`
	// SHA256 is the file's SHA-256 (hex).
	SHA256 string `json:"sha256,omitempty"`
	// Transfer and ChunkBytes: a streamed save's transfer (read it with
	// snapshot.read on Node) and the largest chunk Node gives.
	Transfer   string `json:"transfer,omitempty"`
	ChunkBytes int    `json:"chunk_bytes,omitempty"`
}

// OK is an empty success result.
type OK struct {
	OK bool `json:"ok"`
}
