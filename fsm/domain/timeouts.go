package domain

// Timeouts and waiting tasks: the rules of the spec fields timeout_ms,
// schedule_to_start_ms, signal and deadline_ms, and of tasks of type wait.

// TypeWait is the reserved task type of a waiting task: no worker claims
// it; task.signal or run.signal completes it with the signal's payload as
// its result, and its timeout_ms (if any) fails it.
const TypeWait = "wait"

// MaxTimeoutMS bounds timeout_ms, schedule_to_start_ms, deadline_ms and a
// delayed start (365 days).
const MaxTimeoutMS = 365 * 24 * 3600 * 1000

// Spec problem codes of the timeout fields.
const (
	CodeBadTimeout = "bad_timeout"
	CodeBadSignal  = "bad_signal"
)

// What passing a ready task's schedule_to_start_ms does
// (TaskSpec.ScheduleToStartPolicy).
const (
	// ScheduleToStartFail: the task takes timeout (ready -> failed) and is
	// not retried. The default; an empty policy means it.
	ScheduleToStartFail = "fail"
	// ScheduleToStartAlert: the task stays ready and claimable; it is
	// flagged late and one event (EventScheduleToStartExceeded) says so,
	// once per task.
	ScheduleToStartAlert = "alert"
)

// ScheduleToStartPolicies are the accepted schedule_to_start_policy values
// (the empty string means ScheduleToStartFail).
var ScheduleToStartPolicies = map[string]bool{"": true, ScheduleToStartFail: true, ScheduleToStartAlert: true}

// EventScheduleToStartExceeded is the transition of the task event (not
// an edge: the state stays ready) of a task with policy alert that stayed
// ready past its schedule_to_start_ms. Stable API, like the edge names.
const EventScheduleToStartExceeded = "schedule_to_start_exceeded"

// ScheduleToStartAlerts reports whether t's schedule_to_start_ms raises an
// alert rather than failing it.
func (t TaskSpec) ScheduleToStartAlerts() bool {
	return t.ScheduleToStartPolicy == ScheduleToStartAlert
}

// MinTimeoutMS is the smallest timeout_ms and schedule_to_start_ms.
const MinTimeoutMS = 10

func validateTimeouts(t TaskSpec, path string, lim Limits) problems {
	var ps problems
	check := func(field string, v int64) {
		if v < 0 || v > MaxTimeoutMS {
			ps.add(CodeBadTimeout, path+"."+field, "%s %d must be between %d and %d (0 means none)", field, v, MinTimeoutMS, int64(MaxTimeoutMS))
		} else if v > 0 && v < MinTimeoutMS {
			ps.add(CodeBadTimeout, path+"."+field, "%s %d is below the minimum of %d", field, v, MinTimeoutMS)
		}
	}
	check("timeout_ms", t.TimeoutMS)
	check("schedule_to_start_ms", t.ScheduleToStartMS)
	if !ScheduleToStartPolicies[t.ScheduleToStartPolicy] {
		ps.add(CodeBadTimeout, path+".schedule_to_start_policy", "schedule_to_start_policy %q must be %q (the default) or %q",
			t.ScheduleToStartPolicy, ScheduleToStartFail, ScheduleToStartAlert)
	} else if t.ScheduleToStartPolicy != "" && t.ScheduleToStartMS == 0 {
		ps.add(CodeBadTimeout, path+".schedule_to_start_policy", "schedule_to_start_policy needs schedule_to_start_ms: give the time limit it applies to, or drop it")
	}
	if t.IsWait() {
		if t.ScheduleToStartMS != 0 {
			ps.add(CodeBadTimeout, path+".schedule_to_start_ms", "a wait task is never claimed: use timeout_ms to bound its wait")
		}
	} else if t.Signal != "" && !t.IsSleep() {
		ps.add(CodeBadSignal, path+".signal", "only a task of type %q (or %q) listens for a signal; set type to %q or drop signal", TypeWait, TypeSleep, TypeWait)
	}
	if t.Signal != "" && (!ValidKey(t.Signal) || len(t.Signal) > lim.MaxKeyLen) {
		ps.add(CodeBadSignal, path+".signal", "signal %q must be 1-%d letters, digits, '_', '.', ':' or '-'", t.Signal, lim.MaxKeyLen)
	}
	return ps
}
