package domain

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Schedules: pure rules. A schedule starts a run of its frozen workflow at
// each fire time. Timing (cron or interval) is parsed outside the state
// machine: the leader computes fire times and puts them in the commands it
// proposes (docs/semantics.md, "Schedules").

// ScheduleState is a schedule's state.
type ScheduleState string

const (
	ScheduleActive  ScheduleState = "active"
	SchedulePaused  ScheduleState = "paused"
	ScheduleDeleted ScheduleState = "deleted"
)

// ScheduleStates lists every schedule state.
var ScheduleStates = []ScheduleState{ScheduleActive, SchedulePaused, ScheduleDeleted}

// Schedule edges.
const (
	EdgeSchedulePause  = "pause"
	EdgeScheduleResume = "resume"
	EdgeScheduleDelete = "delete"
)

// ScheduleMachine is the schedule state machine. Fires, skips and catch-up
// change a schedule's counters and next fire time, not its state: they are
// outcomes of a fire (ScheduleOutcome), not edges. deleted is final: the
// record is removed; the runs a schedule started stay.
var ScheduleMachine = NewMachine(Machine[ScheduleState]{
	Name:    "schedule",
	Initial: ScheduleActive,
	States:  ScheduleStates,
	Final:   []ScheduleState{ScheduleDeleted},
	Edges: []Edge[ScheduleState]{
		{Name: EdgeSchedulePause, From: []ScheduleState{ScheduleActive}, To: SchedulePaused},
		{Name: EdgeScheduleResume, From: []ScheduleState{SchedulePaused}, To: ScheduleActive},
		{Name: EdgeScheduleDelete, From: []ScheduleState{ScheduleActive, SchedulePaused}, To: ScheduleDeleted},
	},
})

// Overlap is what a fire does while runs the schedule started earlier are
// still not done.
type Overlap string

const (
	// OverlapSkip (the default): the fire starts nothing and is counted as skipped.
	OverlapSkip Overlap = "skip"
	// OverlapBufferOne: the fire waits until the running ones are done; at
	// most one waits, later fires meanwhile are skipped.
	OverlapBufferOne Overlap = "buffer_one"
	// OverlapAllow: the fire starts a run regardless.
	OverlapAllow Overlap = "allow"
	// OverlapCancelOther: the running ones are cancelled, then the fire starts a run.
	OverlapCancelOther Overlap = "cancel_other"
)

// ValidOverlap reports whether o is an overlap policy ("" = skip).
func ValidOverlap(o Overlap) bool {
	switch o {
	case "", OverlapSkip, OverlapBufferOne, OverlapAllow, OverlapCancelOther:
		return true
	}
	return false
}

// ScheduleOutcome is what one fire did.
type ScheduleOutcome string

const (
	OutcomeStarted  ScheduleOutcome = "started"  // a run was started
	OutcomeSkipped  ScheduleOutcome = "skipped"  // overlap: nothing started
	OutcomeBuffered ScheduleOutcome = "buffered" // overlap: starts when the running ones are done
)

// FireOutcome decides a fire under policy o while active runs of the
// schedule are not done and buffered tells whether a fire already waits.
// cancel reports whether the active runs are cancelled first.
func FireOutcome(o Overlap, active int, buffered bool) (out ScheduleOutcome, cancel bool) {
	if active == 0 {
		return OutcomeStarted, false
	}
	switch o {
	case OverlapAllow:
		return OutcomeStarted, false
	case OverlapCancelOther:
		return OutcomeStarted, true
	case OverlapBufferOne:
		if !buffered {
			return OutcomeBuffered, false
		}
	}
	return OutcomeSkipped, false
}

// DefaultCatchupWindowMS is how late a fire may still run after downtime
// when a schedule names no window: one minute.
const DefaultCatchupWindowMS = 60_000

// MaxCatchupWindowMS bounds a catch-up window (one year).
const MaxCatchupWindowMS = 365 * 24 * 3600 * 1000

// ScheduleLabel is the run label naming the schedule that started a run.
const ScheduleLabel = "flowd.schedule"

// ScheduleRunID is the id of the run a schedule starts at fireAt: a UUIDv7
// whose time is the fire time and whose other bits hash (schedule, fire
// time), so every replica and every retry names the same run.
func ScheduleRunID(schedule string, fireAt int64) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d", schedule, fireAt))
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(fireAt)<<16)
	copy(b[6:], h[:10])
	b[6] = 0x70 | b[6]&0x0f // version 7
	b[8] = 0x80 | b[8]&0x3f // RFC 4122 variant
	s := hex.EncodeToString(b[:])
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

// ValidateScheduleID checks a schedule id: 1-MaxKeyLen key characters.
func ValidateScheduleID(id string, lim Limits) error {
	if !ValidKey(id) || len(id) > lim.MaxKeyLen {
		return fmt.Errorf("schedule id %q must be 1-%d letters, digits, '_', '.', ':' or '-'", id, lim.MaxKeyLen)
	}
	return nil
}
