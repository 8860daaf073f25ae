package raftnode

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
)

// Group commit. Concurrent commands (submits, the dispatcher's claims,
// completions, failures, heartbeats) are coalesced into one fsm.Multi entry:
// while maxFlushers entries are in flight the next requests queue up, and
// the next flush proposes them all at once. A lone request is proposed at
// once, so an idle cluster adds no latency; a busy one spends one raft entry
// (one bolt write and fsync per node, one FSM transaction per node) on many
// commands. Commands are encoded on the caller's goroutine, so the single
// flushing goroutine only frames bytes.
//
// A group is closed before it outgrows one entry: at most maxGroup commands
// and maxGroupBytes of encoded commands (a command larger than that goes
// alone), so grouping never turns valid requests into an oversized entry.
//
// After a busy group the next one lingers (Postgres' commit_delay with
// commit_siblings, made adaptive): the callers just answered are mostly
// closed-loop clients (producers submitting one job per call, workers
// completing and claiming) whose next requests arrive a client round trip
// later, just after the next group would have left without them; they then
// wait for that whole entry and their own, two rounds per call. So when the
// last group held at least lingerMinGroup commands and fewer are queued, the
// flusher waits until as many are queued as the last group held, or at most
// lingerRounds times as long as the last entry took to commit (capped at
// maxLinger), whichever comes first. A caller's turn-around (its answer
// written, or relayed through a forwarding agent, and its next request
// read) takes one to a few commit rounds under load; where a round is
// short (~1 ms), a bound of two rounds ended lingers before the wave was
// back and split it over more entries (docs/performance.md, "Linger"). A
// lone request, or light load, never waits (lingerFor).
//
// Only callers that come back are a wave worth waiting for: a group's
// linger counts the requests in it whose callers the last two groups
// answered (returning), not all of them. A paced producer (one submit per
// tick of its own clock) is answered and comes back at its own pace; a
// linger for it waited as long as the arrival rate took to bring as many
// requests, and the group that made lingered again (at 500 jobs/s on a
// 2-vCPU box, a job's acknowledgement took 11-15 ms with such lingers and
// 7-8 ms without; docs/performance.md, "The paced latency on the
// Firecracker box"). A caller the node cannot tell (Config.CallerOf unset,
// or a call outside a connection) counts as returning, as before.
type batcher struct {
	n        *Node
	mu       sync.Mutex
	queue    []*groupReq
	flushing int
	// want > 0: a lingering flusher waits for that many queued requests;
	// the request that makes the queue that long sends on filled.
	want   int
	filled chan struct{}
	// answered holds the callers the last two groups answered, older
	// first (the flusher's own: maxFlushers is 1): a request from one of
	// them is a caller coming back. A group answers its requests' callers
	// and the waiting claims that ride in it.
	answered [2]map[any]struct{}
	// held, front and rest are order's scratch, kept between groups.
	held        map[any]struct{}
	front, rest []*groupReq

	stats groupStats
}

type groupStats struct {
	entries, commands, lingers, filled, lingerNs, proposeNs atomic.Uint64
}

func (s *groupStats) lingered(d time.Duration, filled bool) {
	s.lingers.Add(1)
	if filled {
		s.filled.Add(1)
	}
	s.lingerNs.Add(uint64(d))
}

func (s *groupStats) proposed(commands int, d time.Duration) {
	s.entries.Add(1)
	s.commands.Add(uint64(commands))
	s.proposeNs.Add(uint64(d))
}

// GroupCommit returns the group commit's totals on this node.
func (n *Node) GroupCommit() cluster.GroupCommitStats {
	s := &n.batch.stats
	return cluster.GroupCommitStats{
		Entries: s.entries.Load(), Commands: s.commands.Load(),
		Lingers: s.lingers.Load(), LingersFilled: s.filled.Load(),
		Linger: time.Duration(s.lingerNs.Load()), Propose: time.Duration(s.proposeNs.Load()),
	}
}

func newBatcher(n *Node) *batcher { return &batcher{n: n, filled: make(chan struct{}, 1)} }

// lingerMinGroup is the group size from which the next group lingers.
const lingerMinGroup = 6

// lingerRounds bounds a linger in commit rounds of the last entry.
const lingerRounds = 4

// maxLinger bounds a linger whatever the last entry's commit time.
const maxLinger = 8 * time.Millisecond

// lingerFor is how long the group after one of last commands, whose entry
// took took to commit, may wait for more requests: 0 below lingerMinGroup.
func lingerFor(last int, took time.Duration) time.Duration {
	if last < lingerMinGroup {
		return 0
	}
	return min(lingerRounds*took, maxLinger)
}

// awaitQueue waits until at least want requests are queued or d passed,
// and reports whether the queue filled.
func (b *batcher) awaitQueue(want int, d time.Duration) bool {
	b.mu.Lock()
	if len(b.queue) >= want {
		b.mu.Unlock()
		return true
	}
	b.want = want
	b.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	filled := false
	select {
	case <-b.filled:
		filled = true
	case <-t.C:
	}
	b.mu.Lock()
	b.want = 0
	select { // a signal sent after the timer fired
	case <-b.filled:
		filled = true
	default:
	}
	b.mu.Unlock()
	return filled
}

// maxFlushers is how many group entries may be in flight at once.
const maxFlushers = 1

// maxGroup bounds the commands in one Multi entry.
const maxGroup = 512

// maxGroupBytes bounds the encoded commands in one Multi entry. What an
// entry writes is about its commands' size plus records and indexes; half
// of the FSM's per-entry write limit leaves room for that.
const maxGroupBytes = fsm.MaxEntryWriteBytes / 4

type groupReq struct {
	buf []byte
	// work is how many tasks the command can make ready (readyWork).
	work int
	// submit: the command is a run.submit, which makes work ready and
	// takes none (order).
	submit bool
	// caller identifies the connection the command came from
	// (Config.CallerOf; nil: unknown).
	caller any
	done   chan groupResp
	// gone is set when the caller stopped waiting (its deadline passed and
	// it was answered "outcome unknown"): a group not yet formed leaves it
	// out, so it is never executed after its caller was answered.
	gone atomic.Bool
}

type groupResp struct {
	res any
	idx uint64
	err error
}

var groupReqPool = sync.Pool{New: func() any { return &groupReq{done: make(chan groupResp, 1)} }}

// ProposeGrouped proposes cmd, possibly together with concurrent commands
// in one Multi entry. It returns cmd's own result or error.
func (n *Node) ProposeGrouped(ctx context.Context, cmd fsm.Command) (any, uint64, error) {
	if !n.IsLeader() {
		return nil, 0, n.notLeader()
	}
	cmd.Stamp(n.cfg.Clock().UnixMilli())
	buf, err := fsm.Encode(cmd)
	if err != nil {
		return nil, 0, err
	}
	r := groupReqPool.Get().(*groupReq)
	r.buf = buf
	r.work = readyWork(cmd)
	_, r.submit = cmd.(*fsm.Submit)
	r.caller = n.callerOf(ctx)
	r.gone.Store(false)
	b := n.batch
	if b.enqueue(r) {
		go b.flush()
	}
	select {
	case out := <-r.done:
		r.buf, r.caller = nil, nil
		groupReqPool.Put(r)
		return out.res, out.idx, out.err
	case <-ctx.Done():
		// r is answered later by the flusher (or left out of its group);
		// it is not reused.
		r.gone.Store(true)
		return nil, 0, &domain.UnavailableError{Reason: "the command did not commit in time; its outcome is unknown", RetryAfter: 250 * time.Millisecond}
	}
}

// enqueue queues r, wakes a lingering flusher the queue is now long enough
// for, and reports whether the caller must start a flusher.
func (b *batcher) enqueue(r *groupReq) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queue = append(b.queue, r)
	if b.want > 0 && len(b.queue) >= b.want {
		b.want = 0
		select { // one waiter, one signal per wait: the buffer has room
		case b.filled <- struct{}{}:
		default:
		}
	}
	if b.flushing < maxFlushers {
		b.flushing++
		return true
	}
	return false
}

func (b *batcher) flush() {
	var linger time.Duration
	last := 0
	for {
		if linger > 0 {
			t0 := time.Now()
			filled := b.awaitQueue(last, linger)
			b.stats.lingered(time.Since(t0), filled)
		}
		b.mu.Lock()
		n, size := 0, 0
		live := b.queue[:0] // drop requests whose callers stopped waiting
		for _, r := range b.queue {
			if !r.gone.Load() {
				live = append(live, r)
			}
		}
		clear(b.queue[len(live):])
		b.queue = live
		for n < len(b.queue) && n < maxGroup {
			l := len(b.queue[n].buf)
			if n > 0 && size+l > maxGroupBytes {
				break
			}
			size += l
			n++
		}
		if n == 0 {
			b.flushing--
			b.mu.Unlock()
			return
		}
		batch := make([]*groupReq, n)
		copy(batch, b.queue)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		b.mu.Unlock()
		b.order(batch)
		back := b.returning(batch)
		start := time.Now()
		b.propose(batch)
		took := time.Since(start)
		b.stats.proposed(len(batch), took)
		last, linger = back, lingerFor(back, took)
	}
}

// order moves the group's submits ahead of its other commands, each
// keeping its order among its own kind, so that a completion that claims its
// worker's next task (or any claim in the group) applies after the work the
// same entry makes ready and takes it, instead of finding none and leaving
// its worker to ask again (a task.claim call that waits, then rides in a
// later entry). Commands in one group were concurrent, so any order of
// them is one the callers could have seen; a caller's own commands keep
// theirs: a submit does not pass an earlier command of its caller, nor any
// command of a caller the node cannot name. The flusher only.
func (b *batcher) order(batch []*groupReq) {
	moves := false
	for i := 1; i < len(batch) && !moves; i++ {
		moves = batch[i].submit && !batch[i-1].submit
	}
	if !moves {
		return
	}
	if b.held == nil {
		b.held = map[any]struct{}{}
	}
	clear(b.held)
	unknown := false // a held command's caller cannot be named: nothing passes it
	front, rest := b.front[:0], b.rest[:0]
	for _, r := range batch {
		if r.submit && r.caller != nil && !unknown {
			if _, own := b.held[r.caller]; !own {
				front = append(front, r)
				continue
			}
		}
		rest = append(rest, r)
		if r.caller == nil {
			unknown = true
		} else {
			b.held[r.caller] = struct{}{}
		}
	}
	n := copy(batch, front)
	copy(batch[n:], rest)
	clear(front)
	clear(rest)
	b.front, b.rest = front[:0], rest[:0]
}

// callerOf names the connection ctx comes from (Config.CallerOf), or nil.
func (n *Node) callerOf(ctx context.Context) any {
	if n == nil || n.cfg.CallerOf == nil {
		return nil
	}
	return n.cfg.CallerOf(ctx)
}

// returning counts the requests of batch whose callers one of the last two
// groups answered, or whose caller is unknown, and makes batch's callers the
// newest answered (the flusher only). Two groups, not one: a caller answered
// just after a group left comes back in the one after it.
func (b *batcher) returning(batch []*groupReq) int {
	older, newer := b.answered[0], b.answered[1]
	n := 0
	for _, r := range batch {
		if r.caller == nil {
			n++
			continue
		}
		_, inNewer := newer[r.caller]
		_, inOlder := older[r.caller]
		if inNewer || inOlder {
			n++
		}
	}
	if older == nil {
		older = make(map[any]struct{}, len(batch))
	}
	clear(older) // reused for batch's callers
	for _, r := range batch {
		if r.caller != nil {
			older[r.caller] = struct{}{}
		}
	}
	b.answered[0], b.answered[1] = newer, older
	return n
}

// answering adds the callers of the waiting claims that ride in the group
// being proposed to its answered ones (the flusher only): a worker whose
// completion left it waiting for work is answered here, and its next
// completion comes back like any caller's.
func (b *batcher) answering(waiting []*waiter) {
	for _, wt := range waiting { // returning made answered[1] for this group
		if wt.caller != nil {
			b.answered[1][wt.caller] = struct{}{}
		}
	}
}

// makesWork reports whether a group holds a command that can make tasks
// ready (a submit, a completion); the type byte is the command's first.
// readyWork estimates how many tasks cmd can make ready: every task of a
// submitted run (an upper bound: only its roots are ready at once), and a
// completion's spawned children plus one dependent. 0 for the rest.
func readyWork(cmd fsm.Command) int {
	switch c := cmd.(type) {
	case *fsm.Submit:
		return max(len(c.Spec.Tasks), 1)
	case *fsm.Complete:
		return 1 + len(c.Spawn)
	}
	return 0
}

// makesWork is the work the batch's commands can make ready.
func makesWork(batch []*groupReq) int {
	n := 0
	for _, r := range batch {
		n += r.work
	}
	return n
}

func (b *batcher) propose(batch []*groupReq) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	work := makesWork(batch)
	if len(batch) == 1 && !(work > 0 && b.n.disp.Waiting() > 0) {
		res, idx, err := b.n.proposeEncoded(ctx, batch[0].buf)
		batch[0].done <- groupResp{res, idx, err}
		return
	}
	now := b.n.cfg.Clock().UnixMilli()
	multi := &fsm.Multi{Cmds: make([][]byte, len(batch), len(batch)+1)}
	multi.Stamp(now)
	for i, r := range batch {
		multi.Cmds[i] = r.buf
	}
	// Work made ready by this entry is claimed in it by whoever waits.
	var waiting []*waiter
	if work > 0 {
		if waiting = b.n.disp.forGroup(work); len(waiting) > 0 {
			b.answering(waiting)
			claim := claimFor(waiting)
			claim.Stamp(now)
			cbuf, _ := fsm.Encode(claim)
			multi.Cmds = append(multi.Cmds, cbuf)
		}
	}
	buf, _ := fsm.Encode(multi) // the binary framing cannot fail
	res, idx, err := b.n.proposeEncoded(ctx, buf)
	var results []any
	if err == nil {
		if mr, ok := res.(*fsm.MultiResult); ok && len(mr.Results) == len(multi.Cmds) {
			results = mr.Results
		} else {
			err = &domain.UnavailableError{Reason: "group commit entry answered without per-command results; its outcome is unknown", RetryAfter: 250 * time.Millisecond}
		}
	}
	if len(waiting) > 0 {
		var cres any
		if err == nil {
			cres = results[len(batch)]
		}
		cerr := err
		if e, ok := cres.(error); ok {
			cerr = e
		}
		if cerr != nil && idx != 0 {
			// The entry was applied and rejected (its commands' fault, not
			// the riders'): it leased nothing, so they go on waiting.
			cres, cerr = &fsm.ClaimResult{Assigned: make([][]fsm.Claimed, len(waiting))}, nil
		}
		b.n.disp.settle(waiting, cres, idx, cerr)
	}
	for i, r := range batch {
		switch {
		case err != nil:
			r.done <- groupResp{nil, idx, err}
		default:
			if e, ok := results[i].(error); ok {
				r.done <- groupResp{nil, idx, e}
			} else {
				r.done <- groupResp{results[i], idx, nil}
			}
		}
	}
}
