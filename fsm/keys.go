package fsm

import (
	"encoding/binary"
	"math"
)

// Key schema. Derived keys live in memory only (derived.go). Every key
// starts with a short tag; numbers are big-endian so
// byte order is numeric order. Runs ids are UUIDv7 strings, so run keys sort
// by creation time.
//
//	m/applied                         last applied raft index (8 bytes)
//	m/now                             FSM clock: max leader stamp seen (8 bytes)
//	m/settings                        Settings (JSON)
//	m/counters                        Counters (JSON)
//	r/<run>                           Run (JSON)
//	rsp/<run>                         the run's frozen spec (JSON), written once
//	rx/<run>                          the run's version-2 rules record (JSON; apply_decide.go)
//	m/rules_runs                      runs holding an rx/ record (8 bytes; absent: none)
//	t/<run>/<key>                     Task (JSON)
//	rs/<state>/<run>                  run-by-state index (derived)
//	rp/<seq8><run>                    runs waiting for admission, FIFO (derived)
//	rf/<finished8><run>               finished runs by time, for retention (derived)
//	rl/<len><label key><len><value><run>  runs by label pair, for run.list (derived, query only)
//	q/<queue>\0<type>\0<prio4><seq8><run>/<key>   ready index (dispatchable tasks; derived)
//	qs/<queue>                        QueueState (JSON)
//	l/<expiry8><run>/<key>            lease index (derived)
//	w/<due8><run>/<key>               retry / compensation-retry index (derived)
//	b/<type>                          Breaker (JSON)
//	wc/<worker>\0<request>\0<task>     tasks leased to a claim request (derived)
//	e/<index8><count4>                the entry's events (JSON array), bounded window
var (
	keyApplied  = []byte("m/applied")
	keyNow      = []byte("m/now")
	keySettings = []byte("m/settings")
	keyCounters = []byte("m/counters")
	pfxMeta     = []byte("m/") // every m/ key above, and m/fsm_version

	pfxRun      = []byte("r/")
	pfxSpec     = []byte("rsp/")
	pfxTask     = []byte("t/")
	pfxRunState = []byte("rs/")
	pfxPending  = []byte("rp/")
	pfxFinished = []byte("rf/")
	pfxLabel    = []byte("rl/")
	pfxReady    = []byte("q/")
	pfxQueue    = []byte("qs/")
	pfxLease    = []byte("l/")
	pfxWake     = []byte("w/")
	pfxBreaker  = []byte("b/")
	pfxEvent    = []byte("e/")
	pfxClaimReq = []byte("wc/")
)

func cat(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
func i64(v int64) []byte  { return u64(uint64(v) ^ (1 << 63)) } // order-preserving
func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func runKey(id string) []byte        { return cat(pfxRun, []byte(id)) }
func specKey(id string) []byte       { return cat(pfxSpec, []byte(id)) }
func taskPrefix(run string) []byte   { return cat(pfxTask, []byte(run), []byte("/")) }
func taskKey(run, key string) []byte { return cat(pfxTask, []byte(run), []byte("/"), []byte(key)) }
func runStateKey(s string, id string) []byte {
	return cat(pfxRunState, []byte(s), []byte("/"), []byte(id))
}
func runStatePrefix(s string) []byte { return cat(pfxRunState, []byte(s), []byte("/")) }
func pendingKey(seq uint64, id string) []byte {
	return cat(pfxPending, u64(seq), []byte(id))
}
func finishedKey(at int64, id string) []byte { return cat(pfxFinished, i64(at), []byte(id)) }
func queueKey(name string) []byte            { return cat(pfxQueue, []byte(name)) }
func breakerKey(typ string) []byte           { return cat(pfxBreaker, []byte(typ)) }

// eventKey holds all events of one entry; the key carries their count so
// trimming the window needs no value reads.
func eventKey(index uint64, count uint32) []byte {
	return cat(pfxEvent, u64(index), u32(count))
}

// eventsFrom is where a scan for events of index >= from starts.
func eventsFrom(from uint64) []byte               { return cat(pfxEvent, u64(from)) }
func leaseKey(expiry int64, taskID string) []byte { return cat(pfxLease, i64(expiry), []byte(taskID)) }
func wakeKey(due int64, taskID string) []byte     { return cat(pfxWake, i64(due), []byte(taskID)) }

// readyPrefix is the ready index of one (queue, type) pair.
func readyPrefix(queue, typ string) []byte {
	return cat(pfxReady, []byte(queue), []byte{0}, []byte(typ), []byte{0})
}

// readyKey orders higher priority first, then FIFO by the order tasks
// became ready.
func readyKey(queue, typ string, prio int32, seq uint64, taskID string) []byte {
	inv := uint32(math.MaxInt32 - int64(prio))
	return cat(readyPrefix(queue, typ), u32(inv), u64(seq), []byte(taskID))
}

func getU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// claimReqPrefix lists the tasks leased to one claim request. Worker and
// request ids never hold a NUL (ValidClaimIDs), so the prefix is exact.
func claimReqPrefix(worker, req string) []byte {
	return cat(pfxClaimReq, []byte(worker), []byte{0}, []byte(req), []byte{0})
}

func claimReqKey(worker, req, taskID string) []byte {
	return cat(pfxClaimReq, []byte(worker), []byte{0}, []byte(req), []byte{0}, []byte(taskID))
}

// taskKeyed is cat(parts..., []byte(t.ID())) without making the id string:
// the index keys of a task end in its id, and building it first was an
// allocation per key (TestTaskKeyedMatchesTheIDKeys).
func taskKeyed(t *Task, parts ...[]byte) []byte {
	n := len(t.RunID) + 1 + len(t.Key)
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	out = append(append(out, t.RunID...), '/')
	return append(out, t.Key...)
}

func leaseKeyOf(expiry int64, t *Task) []byte { return taskKeyed(t, pfxLease, i64(expiry)) }
func wakeKeyOf(due int64, t *Task) []byte     { return taskKeyed(t, pfxWake, i64(due)) }

func claimReqKeyOf(worker, req string, t *Task) []byte {
	return taskKeyed(t, pfxClaimReq, []byte(worker), []byte{0}, []byte(req), []byte{0})
}

func readyKeyOf(queue, typ string, prio int32, seq uint64, t *Task) []byte {
	inv := uint32(math.MaxInt32 - int64(prio))
	return taskKeyed(t, pfxReady, []byte(queue), []byte{0}, []byte(typ), []byte{0}, u32(inv), u64(seq))
}

// labelPrefix lists the runs carrying the label pair (k, v), by run id.
// Both parts are length-prefixed (uvarint), so the prefix of one pair is
// never the start of another's keys, whatever bytes labels hold.
func labelPrefix(k, v string) []byte { return appendLabelPrefix(nil, k, v) }

func appendLabelPrefix(out []byte, k, v string) []byte {
	out = append(out, pfxLabel...)
	out = binary.AppendUvarint(out, uint64(len(k)))
	out = append(out, k...)
	out = binary.AppendUvarint(out, uint64(len(v)))
	return append(out, v...)
}

// labelKey is allocated at its exact size: the mirror keeps one per run
// and label.
func labelKey(k, v, runID string) []byte {
	n := len(pfxLabel) + uvarintLen(len(k)) + len(k) + uvarintLen(len(v)) + len(v) + len(runID)
	return append(appendLabelPrefix(make([]byte, 0, n), k, v), runID...)
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}
