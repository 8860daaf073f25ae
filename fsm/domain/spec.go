package domain

import (
	"encoding/json"
	"regexp"
)

// Spec is a workflow definition as submitted. A run freezes a copy of it.
type Spec struct {
	Name      string `json:"name,omitempty"`
	OnFailure string `json:"on_failure,omitempty"`
	// DeadlineMS bounds the run's running time, counted from its start:
	// once it passes the run is cancelled (reverted with on_failure revert).
	DeadlineMS int64      `json:"deadline_ms,omitempty"`
	Tasks      []TaskSpec `json:"tasks"`
	// Finally are the run's exit handlers: tasks that run once the body
	// (Tasks) reached its outcome, whatever it is (finally.go). Since
	// version 2.
	Finally []TaskSpec `json:"finally,omitempty"`
}

// TaskSpec is one task of a workflow, or a child spawned by a completing
// task (dynamic fan-out).
type TaskSpec struct {
	Key        string          `json:"key"`
	Type       string          `json:"type"`
	Queue      string          `json:"queue,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Deps       []string        `json:"deps,omitempty"`
	Retry      *RetryPolicy    `json:"retry,omitempty"`
	LeaseMS    int64           `json:"lease_ms,omitempty"`
	Priority   int32           `json:"priority,omitempty"`
	RevertType string          `json:"revert_type,omitempty"`
	// TimeoutMS bounds one attempt's running time (a claim's lease cannot
	// be renewed past it); for a wait task, how long it waits for a signal.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// ScheduleToStartMS bounds how long the task may stay ready without a
	// claim; past it the task fails (no retry: no worker took it), or, with
	// ScheduleToStartPolicy "alert", is flagged late and stays claimable.
	ScheduleToStartMS int64 `json:"schedule_to_start_ms,omitempty"`
	// Signal is the name a wait task listens for with run.signal.
	Signal string `json:"signal,omitempty"`
	// ScheduleToStartPolicy is what passing schedule_to_start_ms does:
	// "fail" (the default, also when empty) or "alert"
	// (ScheduleToStartPolicies).
	ScheduleToStartPolicy string `json:"schedule_to_start_policy,omitempty"`
	// When is a condition (a CEL expression, fsm/expr) over the run's
	// input, labels and the task's dependencies, evaluated once they have
	// settled: false skips the task (decide.go). Since version 2.
	When string `json:"when,omitempty"`
	// Trigger is the task's trigger rule (Triggers; "" = all_succeeded).
	// Since version 2.
	Trigger string `json:"trigger,omitempty"`
	// DurationMS and Until are a sleep task's timer (sleep.go): how long
	// it sleeps once ready, or until when (RFC 3339). Since version 2.
	DurationMS int64  `json:"duration_ms,omitempty"`
	Until      string `json:"until,omitempty"`
	// ForEach is a CEL expression giving a list: the task expands into one
	// task per element when it would become ready; MaxParallel caps how
	// many of them run at once (0: no cap). Since version 2 (loop.go).
	ForEach     string `json:"for_each,omitempty"`
	MaxParallel int    `json:"max_parallel,omitempty"`
	// Definition makes a task of type run a child run of this stored
	// definition ("name" or "name@version"), its input the task's input
	// (child.go). Since version 2.
	Definition string `json:"definition,omitempty"`
	// Spec is, instead of Definition, the child run's workflow inline:
	// validated with the parent's spec and frozen in it (child.go).
	// Since version 2.
	Spec *Spec `json:"spec,omitempty"`
}

// IsWait reports whether the task is a wait task: no worker claims it; a
// signal completes it.
func (t TaskSpec) IsWait() bool { return t.Type == TypeWait }

// RetryPolicy says how often and how far apart a task is attempted.
type RetryPolicy struct {
	MaxAttempts      int     `json:"max_attempts,omitempty"`
	InitialBackoffMS int64   `json:"initial_backoff_ms,omitempty"`
	MaxBackoffMS     int64   `json:"max_backoff_ms,omitempty"`
	Multiplier       float64 `json:"multiplier,omitempty"`
}

// OnFailure values.
const (
	OnFailureFail   = "fail"
	OnFailureRevert = "revert"
)

// Defaults applied by Normalize.
//
// max_attempts defaults to 1, as the client contract (PROTOCOL.md) fixes
// it; a cluster can raise its own default (settings default_max_attempts,
// NormalizeWith), e.g. to RecommendedMaxAttempts: what users of Temporal
// and Asynq expect, several attempts with exponential backoff. With 10
// attempts, the first retry after 0.5-1 s, doubling, capped at 30-60 s, a
// task that keeps failing gives up after 2-4 minutes (9 backoffs), which
// rides out a short outage of what it calls.
const (
	DefaultQueue            = "default"
	DefaultMaxAttempts      = 1
	RecommendedMaxAttempts  = 10
	DefaultLeaseMS          = 30_000
	DefaultInitialBackoffMS = 1_000
	DefaultMaxBackoffMS     = 60_000
	DefaultMultiplier       = 2.0
)

// MaxUnackedExpiries bounds the lease expiries a task may have for free:
// a lease that expires before its worker acknowledged the claim (a heartbeat,
// complete or fail with its token) does not spend an attempt, because the
// claim reply may have been lost in a fault. After this many such expiries
// of one task (forward attempts and compensations counted apart), further
// unacknowledged expiries count like any other, so a task no worker can
// ever acknowledge (say, a claim reply too large to deliver) still ends.
const MaxUnackedExpiries = 3

// Limits bound what one run may hold. They are enforced by validation before
// proposing and again inside the state machine.
type Limits struct {
	MaxTasks       int   // tasks in a submitted spec
	MaxRunTasks    int   // tasks in a run, including spawned children
	MaxInputBytes  int   // one task's input, or a run's input
	MaxResultBytes int   // one task's result or error
	MaxAttempts    int   // retry.max_attempts
	MaxLeaseMS     int64 // lease_ms
	MaxBackoffMS   int64 // retry.max_backoff_ms
	MaxKeyLen      int
	MaxLabels      int
}

// DefaultLimits are the limits used by the product.
var DefaultLimits = Limits{
	MaxTasks:       1000,
	MaxRunTasks:    10_000,
	MaxInputBytes:  1 << 20,
	MaxResultBytes: 1 << 20,
	MaxAttempts:    100,
	MaxLeaseMS:     24 * 3600 * 1000,
	MaxBackoffMS:   24 * 3600 * 1000,
	MaxKeyLen:      128,
	MaxLabels:      64,
}

// keyPattern is the rule ValidKey applies, as documented; ValidKey checks
// it with a byte table (the regexp cost ~1 µs per name on every submit;
// TestValidKeyIsKeyPattern holds the two equal).
var keyPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)

// keyByte marks the bytes a key may hold after its first: 1 for a letter or
// digit (allowed first too), 2 for '_', '.', ':' and '-'.
var keyByte = func() (t [256]uint8) {
	for c := '0'; c <= '9'; c++ {
		t[c] = 1
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = 1, 1
	}
	for _, c := range "_.:-" {
		t[c] = 2
	}
	return t
}()

// ValidKey reports whether s may be used as a task key, queue or type name:
// a letter or digit followed by letters, digits, '_', '.', ':' or '-'.
func ValidKey(s string) bool {
	if s == "" || keyByte[s[0]] != 1 {
		return false
	}
	for i := 1; i < len(s); i++ {
		if keyByte[s[i]] == 0 {
			return false
		}
	}
	return true
}

// Normalize returns a copy of the spec with every default filled in. The
// frozen spec of a run is the normalized one, so later default changes never
// alter a run that already exists.
func (s Spec) Normalize() Spec { return s.NormalizeWith(DefaultMaxAttempts) }

// NormalizeWith is Normalize with maxAttempts as the default max_attempts
// (the cluster's setting; < 1 means DefaultMaxAttempts).
func (s Spec) NormalizeWith(maxAttempts int) Spec {
	out := s
	if out.OnFailure == "" {
		out.OnFailure = OnFailureFail
	}
	out.Tasks = make([]TaskSpec, len(s.Tasks))
	for i, t := range s.Tasks {
		out.Tasks[i] = t.NormalizeWith(maxAttempts)
	}
	if len(s.Finally) > 0 {
		out.Finally = make([]TaskSpec, len(s.Finally))
		for i, t := range s.Finally {
			out.Finally[i] = t.NormalizeWith(maxAttempts)
		}
	}
	return out
}

// Normalize returns a copy of the task spec with defaults filled in.
func (t TaskSpec) Normalize() TaskSpec { return t.NormalizeWith(DefaultMaxAttempts) }

// NormalizeWith is Normalize with maxAttempts as the default max_attempts
// (< 1 means DefaultMaxAttempts).
func (t TaskSpec) NormalizeWith(maxAttempts int) TaskSpec {
	if maxAttempts < 1 {
		maxAttempts = DefaultMaxAttempts
	}
	if t.Queue == "" {
		t.Queue = DefaultQueue
	}
	if t.LeaseMS == 0 {
		t.LeaseMS = DefaultLeaseMS
	}
	r := RetryPolicy{}
	if t.Retry != nil {
		r = *t.Retry
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = maxAttempts
	}
	if r.InitialBackoffMS == 0 {
		r.InitialBackoffMS = DefaultInitialBackoffMS
		if r.MaxBackoffMS > 0 {
			// An explicit cap below the default start wins.
			r.InitialBackoffMS = min(r.InitialBackoffMS, r.MaxBackoffMS)
		}
	}
	if r.MaxBackoffMS == 0 {
		r.MaxBackoffMS = max(DefaultMaxBackoffMS, r.InitialBackoffMS)
	}
	if r.Multiplier == 0 {
		r.Multiplier = DefaultMultiplier
	}
	t.Retry = &r
	if len(t.Deps) == 0 {
		t.Deps = nil
	}
	return t
}
