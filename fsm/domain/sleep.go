package domain

import "time"

// Durable timers (state-machine version 2): a task of type sleep with
// duration_ms or until is never claimed by a worker. When it becomes ready it starts sleeping — for
// duration_ms, or until the instant until (RFC 3339) — and at that leader
// time the existing deadline loop (a wake-up of the run's timer index,
// fired by the leader's Tick) completes it (edge wake); the timer is
// replicated state, so it survives a failover. A signal for it (task.signal,
// or run.signal with its signal name, like a wait task's) completes it
// early, the signal's payload as its result. An until in the past wakes it
// at the next tick.

// TypeSleep is the reserved task type of a durable timer.
const TypeSleep = "sleep"

// EdgeWake: a sleeping (ready) sleep task's time came.
const EdgeWake = "wake"

// CodeBadSleep is the spec problem of the sleep fields.
const CodeBadSleep = "bad_sleep"

// IsSleep reports whether the task is a sleep task: type sleep with
// duration_ms or until. Type sleep without either is an ordinary worker
// type, as it was before version 2 (specs that used it keep their meaning).
func (t TaskSpec) IsSleep() bool {
	return t.Type == TypeSleep && (t.DurationMS != 0 || t.Until != "")
}

// SleepUntilMS is an until value in Unix milliseconds (ok false: not RFC
// 3339).
func SleepUntilMS(until string) (int64, bool) {
	at, err := time.Parse(time.RFC3339Nano, until)
	if err != nil {
		return 0, false
	}
	return at.UnixMilli(), true
}

func validateSleep(t TaskSpec, path, prefix string) problems {
	var ps problems
	if prefix == "spawn" && (t.DurationMS != 0 || t.Until != "") {
		ps.add(CodeBadSleep, path, "a spawned task cannot be a timer; put the sleep task in the workflow")
		return ps
	}
	if t.Type != TypeSleep {
		if t.DurationMS != 0 {
			ps.add(CodeBadSleep, path+".duration_ms", "only a task of type %q sleeps; set type to %q or drop duration_ms", TypeSleep, TypeSleep)
		}
		if t.Until != "" {
			ps.add(CodeBadSleep, path+".until", "only a task of type %q sleeps; set type to %q or drop until", TypeSleep, TypeSleep)
		}
		return ps
	}
	switch {
	case !t.IsSleep():
		return ps // a worker's type "sleep"
	case t.DurationMS != 0 && t.Until != "":
		ps.add(CodeBadSleep, path, "a sleep task has duration_ms or until, not both")
	case t.DurationMS < 0 || t.DurationMS > MaxTimeoutMS:
		ps.add(CodeBadSleep, path+".duration_ms", "duration_ms %d must be between 1 and %d", t.DurationMS, int64(MaxTimeoutMS))
	case t.Until != "":
		if _, ok := SleepUntilMS(t.Until); !ok {
			ps.add(CodeBadSleep, path+".until", "until %q is not an RFC 3339 time such as 2026-12-24T18:00:00Z", t.Until)
		}
	}
	if t.TimeoutMS != 0 || t.ScheduleToStartMS != 0 {
		ps.add(CodeBadSleep, path, "a sleep task has no timeout_ms or schedule_to_start_ms: its timer is its duration")
	}
	return ps
}
