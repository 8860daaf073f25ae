package raftnode

import (
	"log/slog"
	"runtime"
	"sync"
)

// DefaultFollowerApplyNice is how much a follower's apply thread's nice
// value is raised above the agent's (cluster.Config.FollowerApplyNice).
const DefaultFollowerApplyNice = 10

// applyThread runs a follower's applies at a lower scheduling priority
// (on Linux a nice value is per thread), so that where agents share cores
// with each other or with their clients, the commit path (the followers'
// appends and acknowledgements, the leader's own apply and its callers)
// gets a core first and a follower applies in the time left over. A
// follower's apply is off the commit path: raft commits an entry once a
// majority stored it, and callers are answered from the leader's apply.
// The weight of nice 10 is about a tenth of nice 0's, so a lowered apply
// still advances under full load (CFS never starves a runnable thread),
// only later.
//
// Raft's FSM goroutine is locked to its thread, whose nice value is
// raised while the node follows and set back when it leads: the leader's
// apply is on every caller's path. A nice value can be raised without
// privileges but lowered again only with them (root, CAP_SYS_NICE, or
// RLIMIT_NICE: systemd's LimitNICE=), so without them a follower applies
// at the agent's priority. Handing a follower's applies to a goroutine
// locked to a lowered thread of its own instead (one that ends when the
// node leads) was measured and not kept: its two thread switches per
// applied batch cost more CPU than the priority won back
// (docs/performance.md, "A follower's apply at a lower priority").
//
// Every call must come from raft's FSM goroutine (Apply, Snapshot and
// Restore are never concurrent): the first follower call locks the calling
// goroutine to its thread, and later calls from another thread change
// nothing. The mutex only keeps a misuse from racing.
type applyThread struct {
	mu   sync.Mutex
	nice int // added to the agent's nice value; <= 0: off
	// warn is told once that the priority could not be changed (the
	// applies then stay at the agent's priority).
	warn func(err error)

	// The thread raft's FSM goroutine is locked to (0: not yet), its nice
	// value before it was raised, and whether it is raised.
	tid     int
	base    int
	lowered bool
}

// probeInPlace reports whether the agent may set a raised nice value back
// (tests replace it).
var probeInPlace = canRestoreThreadPriority

// newApplyThread returns the applyThread for cluster.Config's
// FollowerApplyNice (0: DefaultFollowerApplyNice; negative: off).
func newApplyThread(nice int, log *slog.Logger) *applyThread {
	if nice == 0 {
		nice = DefaultFollowerApplyNice
	}
	t := &applyThread{nice: nice, warn: func(err error) {
		log.Warn("a follower's applies run at the agent's priority", "err", err)
	}}
	switch {
	case nice <= 0 || !threadNiceSupported:
		t.nice = 0
	case !probeInPlace():
		t.nice = 0
		log.Info("a follower applies at the agent's priority: this process may not set a thread's nice value back once raised; run it as root, or with CAP_SYS_NICE or an RLIMIT_NICE of 20 (systemd LimitNICE=+0, docker --ulimit nice=20), to let followers apply at a lower priority (--follower-apply-nice)")
	default:
		if base, err := threadNice(); err == nil && base >= 19 {
			t.nice = 0 // the agent already runs at the lowest priority
		}
	}
	return t
}

// run runs fn, on the calling goroutine, at a lowered priority when
// follower is true and lowering is on, otherwise at the agent's. It
// returns when fn has.
func (t *applyThread) run(follower bool, fn func()) {
	if t != nil {
		t.set(follower)
	}
	fn()
}

// set raises or restores the calling thread's nice value.
func (t *applyThread) set(follower bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.nice <= 0 {
		return
	}
	if t.tid == 0 {
		if !follower {
			return // nothing raised yet
		}
		// Never unlocked: the thread ends with raft's FSM goroutine (and
		// goroutines started from it get threads the runtime's template
		// thread creates, not copies of this one).
		runtime.LockOSThread()
		base, err := threadNice()
		if err != nil {
			t.fail(err)
			return
		}
		t.tid, t.base = threadID(), base
	}
	if threadID() != t.tid || follower == t.lowered {
		return // another goroutine (not raft's), or nothing to change
	}
	want := t.base
	if follower {
		want = min(t.base+t.nice, 19)
	}
	if err := setThreadNice(want); err != nil {
		t.fail(err)
		return
	}
	t.lowered = follower
}

// fail turns lowering off after an error, telling warn once. A thread
// left raised is set back first, if it can be.
func (t *applyThread) fail(err error) {
	if t.lowered && threadID() == t.tid && setThreadNice(t.base) == nil {
		t.lowered = false
	}
	t.nice = 0
	if t.warn != nil {
		t.warn(err)
		t.warn = nil
	}
}
