package fsm

import (
	"fmt"
)

// The registry: every command type the state machine knows, with its name
// and the state-machine version that introduced it, and every rule change
// inside Apply with its version. It is the one place a type number is
// given out and the one place Decode turns a type byte into a command.
//
// A cluster applies the rules of its *active* version (replicated state,
// SetVersion) and nothing newer, so agents of two releases can share a
// cluster during a rolling upgrade: the new binary keeps the old behaviour
// until every voter supports the new version and the leader raises the
// active version (docs/operations.md, "Rolling upgrades").

// MsgType tags a command: one byte followed by its payload (JSON, or a
// MessagePack tuple for the queue path's commands: command_msgp.go).
// Numbers are explicit and append-only; never renumber or reuse one. A type
// with IgnoreUnknown set may be skipped by an older binary that does not
// know it.
type MsgType uint8

const (
	MsgSubmit      MsgType = 1
	MsgClaim       MsgType = 2
	MsgHeartbeat   MsgType = 3
	MsgComplete    MsgType = 4
	MsgFail        MsgType = 5
	MsgReap        MsgType = 6
	MsgTick        MsgType = 7
	MsgCancelRun   MsgType = 8
	MsgInterrupt   MsgType = 9
	MsgResume      MsgType = 10
	MsgRevert      MsgType = 11
	MsgReplay      MsgType = 12
	MsgQueueSet    MsgType = 13
	MsgQueuePause  MsgType = 14
	MsgSettingsSet MsgType = 15
	MsgGC          MsgType = 16
	MsgMulti       MsgType = 17
	MsgNoop        MsgType = 18
	MsgNodeInfo    MsgType = 19
	// MsgBatch is Multi in its binary framing (batch.go); Encode writes a
	// Multi as MsgBatch, Decode reads both.
	MsgBatch MsgType = 20
	// MsgDigestMark and MsgDigestVerdict are the replicated digest check
	// (digestcheck.go). They change no state and are always sent with
	// IgnoreUnknown set.
	MsgDigestMark    MsgType = 21
	MsgDigestVerdict MsgType = 22
	// MsgQueueDelete forgets a queue that holds no ready or running task.
	MsgQueueDelete     MsgType = 23
	MsgScheduleCreate  MsgType = 24
	MsgScheduleFire    MsgType = 25
	MsgSchedulePause   MsgType = 26
	MsgScheduleTrigger MsgType = 27
	MsgScheduleDelete  MsgType = 28
	// MsgTaskSignal and MsgRunSignal complete waiting tasks (apply_signal.go).
	MsgTaskSignal       MsgType = 30
	MsgRunSignal        MsgType = 31
	MsgDefinitionPut    MsgType = 36
	MsgSubmitDefinition MsgType = 37
	// MsgRateLimitSet sets or removes a rate limit (apply_ratelimit.go).
	MsgRateLimitSet   MsgType = 40
	MsgACLTokenCreate MsgType = 46
	MsgACLTokenDelete MsgType = 47
	// MsgQueueAuto turns a queue's auto concurrency on (or changes its
	// bounds); MsgQueueCap is the controller's change of an auto queue's
	// cap (apply_autoconc.go).
	MsgQueueAuto MsgType = 54
	MsgQueueCap  MsgType = 55
	// MsgNewTerm is a new leader's first command, after its barrier
	// (apply_term.go).
	MsgNewTerm MsgType = 60
	// MsgSetVersion raises the cluster's active state-machine version
	// (apply_version.go).
	MsgSetVersion MsgType = 61
	// MsgRunRetry takes a failed or cancelled run back to running
	// (apply_retry.go).
	MsgRunRetry MsgType = 62

	// IgnoreUnknown marks a command an older binary may skip.
	IgnoreUnknown MsgType = 128
)

// skippedTypes were never given to a command by any release (gaps left
// between groups of commands). No number has been retired yet; a retired
// number is listed here with the version that stopped using it and is never
// given out again.
var skippedTypes = []MsgType{29, 32, 33, 34, 35, 38, 39, 41, 42, 43, 44, 45, 48, 49, 50, 51, 52, 53, 56, 57, 58, 59}

// Version is a state-machine version: the set of commands and rules a
// cluster applies. It only grows.
type Version uint32

const (
	// V1 is every command and rule before versioning: what a cluster
	// whose state holds no version runs.
	V1 Version = 1
	// V2 is workflows that decide: trigger rules, when conditions and the
	// skipped task state (domain/decide.go, apply_decide.go).
	V2 Version = 2
)

// MinVersion is the oldest active version this binary can apply (old
// behaviour stays in the code until a release drops its version).
// MaxVersion, the newest, is in version_max.go (a build tag gives the
// upgrade tests a binary one version ahead).
const MinVersion = V1

// commandInfo is one row of the registry.
type commandInfo struct {
	Type  MsgType
	Name  string
	Since Version
	// New returns an empty command to decode into; nil for the types
	// Decode frames itself (MsgBatch, the digest check).
	New func() Command
}

// commands is the registry. Since is the version whose cluster may apply
// the command: the leader refuses to propose a newer one (ErrNeedsVersion)
// and Apply rejects it on every replica alike. SetVersion is V1: every
// binary that can report a version range knows it (a binary from before
// versioning reports none, so no raise is proposed while one is a voter).
var commands = []commandInfo{
	{MsgSubmit, "submit", V1, func() Command { return &Submit{} }},
	{MsgClaim, "claim", V1, func() Command { return &Claim{} }},
	{MsgHeartbeat, "heartbeat", V1, func() Command { return &Heartbeat{} }},
	{MsgComplete, "complete", V1, func() Command { return &Complete{} }},
	{MsgFail, "fail", V1, func() Command { return &Fail{} }},
	{MsgReap, "reap", V1, func() Command { return &Reap{} }},
	{MsgTick, "tick", V1, func() Command { return &Tick{} }},
	{MsgCancelRun, "cancel", V1, func() Command { return &RunVerb{msg: MsgCancelRun} }},
	{MsgInterrupt, "interrupt", V1, func() Command { return &RunVerb{msg: MsgInterrupt} }},
	{MsgResume, "resume", V1, func() Command { return &RunVerb{msg: MsgResume} }},
	{MsgRevert, "revert", V1, func() Command { return &RunVerb{msg: MsgRevert} }},
	{MsgReplay, "replay", V1, func() Command { return &Replay{} }},
	{MsgQueueSet, "queue_set", V1, func() Command { return &QueueSet{} }},
	{MsgQueuePause, "queue_pause", V1, func() Command { return &QueuePause{} }},
	{MsgSettingsSet, "settings_set", V1, func() Command { return &SettingsSet{} }},
	{MsgGC, "gc", V1, func() Command { return &GC{} }},
	{MsgMulti, "multi", V1, func() Command { return &Multi{} }},
	{MsgNoop, "noop", V1, func() Command { return &Noop{} }},
	{MsgNodeInfo, "node_info", V1, func() Command { return &NodeInfo{} }},
	{MsgBatch, "batch", V1, nil},
	{MsgDigestMark, "digest_mark", V1, nil},
	{MsgDigestVerdict, "digest_verdict", V1, nil},
	{MsgQueueDelete, "queue_delete", V1, func() Command { return &QueueDelete{} }},
	{MsgScheduleCreate, "schedule_create", V1, func() Command { return &ScheduleCreate{} }},
	{MsgScheduleFire, "schedule_fire", V1, func() Command { return &ScheduleFire{} }},
	{MsgSchedulePause, "schedule_pause", V1, func() Command { return &SchedulePause{} }},
	{MsgScheduleTrigger, "schedule_trigger", V1, func() Command { return &ScheduleTrigger{} }},
	{MsgScheduleDelete, "schedule_delete", V1, func() Command { return &ScheduleDelete{} }},
	{MsgTaskSignal, "task_signal", V1, func() Command { return &TaskSignal{} }},
	{MsgRunSignal, "run_signal", V1, func() Command { return &RunSignal{} }},
	{MsgDefinitionPut, "definition_put", V1, func() Command { return &DefinitionPut{} }},
	{MsgSubmitDefinition, "submit_definition", V1, func() Command { return &SubmitDefinition{} }},
	{MsgRateLimitSet, "rate_limit_set", V1, func() Command { return &RateLimitSet{} }},
	{MsgACLTokenCreate, "acl_token_create", V1, func() Command { return &ACLTokenCreate{} }},
	{MsgACLTokenDelete, "acl_token_delete", V1, func() Command { return &ACLTokenDelete{} }},
	{MsgQueueAuto, "queue_auto", V1, func() Command { return &QueueAuto{} }},
	{MsgQueueCap, "queue_cap", V1, func() Command { return &QueueCap{} }},
	{MsgNewTerm, "new_term", V1, func() Command { return &NewTerm{} }},
	{MsgSetVersion, "set_version", V1, func() Command { return &SetVersion{} }},
	{MsgRunRetry, "run_retry", V2, func() Command { return &RunRetry{} }},
}

// Rule is a change of behaviour inside Apply, in force from version Since
// (applier.atLeast). A rule's old behaviour stays in the code until a
// release drops support for the versions before it (MinVersion).
type Rule struct {
	Name  string
	Since Version
	Doc   string
}

// Rules lists every versioned rule, oldest first; rulesOfBuild adds the
// ones only a test build carries (version_max.go).
var Rules = append([]Rule{
	{Name: "decisions", Since: V2,
		Doc: "a task may have a trigger rule and a when condition; a task they decide against is skipped; a run that uses them keeps running after a failure until every task settled"},
	{Name: "replay_drops_schedule_label", Since: V2,
		Doc: "a replay of a run a schedule started does not carry the schedule's label (flowd.schedule)"},
}, rulesOfBuild...)

// byType indexes commands by type number (without IgnoreUnknown).
var byType = func() (t [128]*commandInfo) {
	for i := range commands {
		t[commands[i].Type&^IgnoreUnknown] = &commands[i]
	}
	return t
}()

func lookup(t MsgType) *commandInfo { return byType[t&^IgnoreUnknown] }

func (t MsgType) String() string {
	if c := lookup(t); c != nil {
		return c.Name
	}
	return fmt.Sprintf("msg(%d)", uint8(t))
}

// CommandSince returns the version that introduced command type t (0 for
// an unknown type).
func CommandSince(t MsgType) Version {
	if c := lookup(t); c != nil {
		return c.Since
	}
	return 0
}

// Decode parses an encoded command. It is the one place a type byte is
// turned into a command.
func Decode(buf []byte) (Command, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("%w: empty entry", ErrBadCommand)
	}
	t := MsgType(buf[0])
	info := lookup(t)
	switch {
	case info == nil:
		if t&IgnoreUnknown != 0 {
			return nil, errIgnored
		}
		return nil, fmt.Errorf("%w: unknown type %d", ErrBadCommand, uint8(t))
	case info.Type == MsgBatch:
		m, err := decodeBatch(buf[1:])
		if err != nil {
			return nil, fmt.Errorf("%w: batch payload: %v", ErrBadCommand, err)
		}
		return m, nil
	case info.New == nil:
		// The digest check changes no state (every version skips it the
		// same way); the node acts on it after applying (digestcheck.go).
		return nil, errIgnored
	}
	c := info.New()
	if err := unmarshal(buf[1:], c); err != nil {
		return nil, fmt.Errorf("%w: %s payload: %v", ErrBadCommand, t, err)
	}
	return c, nil
}
