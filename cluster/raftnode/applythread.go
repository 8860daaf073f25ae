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
// The leader applies at the agent's priority: its apply is on every
// caller's path. A thread's nice value can be raised without privileges
// but lowered again only with them (CAP_SYS_NICE, or RLIMIT_NICE, systemd's
// LimitNICE=), so there are two ways to do it, chosen once at start:
//
//   - in place, when the agent may lower a nice value again: raft's FSM
//     goroutine is locked to its thread, whose nice value is raised while
//     following and set back on becoming leader;
//   - handed off, otherwise: a follower's applies run on a goroutine of
//     their own, locked to a thread whose nice value is raised once; when
//     the node becomes leader that goroutine returns still locked, so the
//     Go runtime ends the thread rather than reuse it at that priority.
//     Each apply then costs two thread switches (~20 µs of CPU on a small
//     VM), about one per five jobs at full load.
//
// Every call comes from raft's FSM goroutine (Apply, Snapshot and Restore
// are never concurrent), and Stop after raft has shut down; the mutex only
// makes a misuse safe.
type applyThread struct {
	nice int // added to the agent's nice value; <= 0: off

	mu sync.Mutex
	// warn is told once that the priority could not be changed (the
	// applies then stay at the agent's priority).
	warn func(err error)

	// In place: the thread raft's FSM goroutine is locked to (0: not yet),
	// its nice value before it was raised, and whether it is raised.
	inPlace bool
	tid     int
	base    int
	lowered bool

	// Handed off: the lowered goroutine's requests (nil: none running).
	reqs chan func()
	acks chan struct{}
	done chan struct{}
}

// probeInPlace chooses the way (tests set it to try both).
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
	if nice > 0 && threadNiceSupported {
		if base, err := threadNice(); err == nil && base >= 19 {
			t.nice = 0 // the agent already runs at the lowest priority
		}
		t.inPlace = probeInPlace()
	}
	return t
}

// run runs fn at a lowered priority when follower is true and lowering is
// on, otherwise at the agent's. It returns when fn has.
func (t *applyThread) run(follower bool, fn func()) {
	if t == nil || t.nice <= 0 || !threadNiceSupported {
		fn()
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inPlace {
		t.setInPlace(follower)
		fn()
		return
	}
	if !follower {
		t.stopLocked()
		fn()
		return
	}
	if t.reqs == nil {
		t.startLocked()
	}
	t.reqs <- fn
	<-t.acks
}

// setInPlace raises or restores the calling thread's nice value.
func (t *applyThread) setInPlace(follower bool) {
	if t.tid == 0 {
		if !follower {
			return // nothing raised yet
		}
		// Never unlocked: the thread ends with raft's FSM goroutine.
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

// fail turns lowering off after an error, telling warn once.
func (t *applyThread) fail(err error) {
	t.nice = 0
	if t.warn != nil {
		t.warn(err)
		t.warn = nil
	}
}

func (t *applyThread) startLocked() {
	reqs, acks, done := make(chan func()), make(chan struct{}), make(chan struct{})
	t.reqs, t.acks, t.done = reqs, acks, done
	warn := t.warn
	t.warn = nil // once per agent, not per thread
	delta := t.nice
	go func() {
		defer close(done)
		// Never unlocked: the goroutine ends locked to its thread, so the
		// runtime ends the thread instead of handing it (with its nice
		// value) to other goroutines.
		runtime.LockOSThread()
		err := func() error {
			base, err := threadNice()
			if err != nil {
				return err
			}
			return setThreadNice(min(base+delta, 19))
		}()
		if err != nil && warn != nil {
			warn(err)
		}
		for fn := range reqs {
			fn()
			acks <- struct{}{}
		}
	}()
}

func (t *applyThread) stopLocked() {
	if t.reqs == nil {
		return
	}
	close(t.reqs)
	<-t.done
	t.reqs, t.acks, t.done = nil, nil, nil
}

// Stop ends the handed-off goroutine and its thread, if any (the node is
// shutting down; raft's FSM goroutine has returned).
func (t *applyThread) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopLocked()
}
