package raftnode

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
)

// Dispatcher holds long-polling claims on the leader and proposes one Claim
// entry for every waiter that can be served, whenever applied state changes
// (woken by the FSM's commit notifications, never by polling). Waiters are
// served FIFO; the entry assigns each up to its max, so a burst of ready
// tasks costs one raft round trip for all waiting workers.
//
// Concurrency: Claim may be called from any goroutine; run is the single
// loop that proposes, so at most one claim entry is in flight at a time.
type Dispatcher struct {
	n    *Node
	wake chan struct{}

	mu      sync.Mutex
	waiters []*waiter

	throttled atomic.Uint64 // see ThrottledDispatches

	// beforePropose, when set (tests), runs before a claim entry of the
	// loop is proposed.
	beforePropose func()
	// heldHook, when set (tests), is called each time a claim is held.
	heldHook atomic.Pointer[func()]
}

type waiter struct {
	w         fsm.Waiter
	key       string            // waiterKey(w)
	caller    any               // the connection it came from (Node.callerOf)
	ch        chan claimOutcome // buffered 1; written once
	inFlight  bool
	done      bool
	cancelled bool // the caller stopped waiting while its claim was in flight
	// emptyAt is the index of a claim entry that gave this waiter nothing;
	// it is not proposed for again until something else is applied.
	emptyAt uint64
}

type claimOutcome struct {
	tasks []fsm.Claimed
	err   error
}

func newDispatcher(n *Node) *Dispatcher {
	return &Dispatcher{n: n, wake: make(chan struct{}, 1)}
}

// Claim long-polls for up to w.Max tasks until ctx is done. It returns an
// empty slice when the wait ends without work, and *NotLeaderError on a
// follower. If ctx ends while this waiter's claim entry is in flight, Claim
// waits up to grace for its outcome; tasks assigned after that are lost to
// this caller and come back when their lease expires.
func (n *Node) Claim(ctx context.Context, w fsm.Waiter, grace time.Duration) ([]fsm.Claimed, error) {
	return n.disp.claim(ctx, w, grace)
}

func (d *Dispatcher) claim(ctx context.Context, w fsm.Waiter, grace time.Duration) ([]fsm.Claimed, error) {
	if !d.n.IsLeader() {
		return nil, d.n.notLeader()
	}
	wt := &waiter{w: w, key: waiterKey(w), caller: d.n.callerOf(ctx), ch: make(chan claimOutcome, 1)}
	d.mu.Lock()
	d.waiters = append(d.waiters, wt)
	d.mu.Unlock()
	if h := d.heldHook.Load(); h != nil {
		(*h)()
	}
	if got := d.resent(wt); got != nil {
		return got, nil
	}
	d.poke()
	select {
	case out := <-wt.ch:
		return out.tasks, out.err
	case <-ctx.Done():
	}
	d.mu.Lock()
	if !wt.inFlight && !wt.done {
		wt.done = true
		d.remove(wt)
		d.mu.Unlock()
		return nil, nil
	}
	wt.cancelled = true
	d.mu.Unlock()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case out := <-wt.ch:
		return out.tasks, out.err
	case <-t.C:
		return nil, &domain.UnavailableError{Reason: "the claim did not commit in time; retry", RetryAfter: 100 * time.Millisecond}
	}
}

// resent answers a re-sent claim whose first delivery's entry was applied
// before wt was held: that entry leased tasks to the request id, and its
// outcome went to a caller that had stopped waiting. Without this, wt would
// wait for ready work (the leases made none) and answer nothing, and the
// worker, told "no tasks", would forget the request id: its leases would
// sit with nobody until they expired. A first delivery still in flight
// when wt was held hands its leases to wt when it settles (siblingsOf).
// Nil when there is nothing to answer this way.
func (d *Dispatcher) resent(wt *waiter) []fsm.Claimed {
	if wt.w.RequestID == "" {
		return nil
	}
	got, err := d.n.fsm.ClaimedBy(wt.w.WorkerID, wt.w.RequestID)
	if err != nil || len(got) == 0 {
		return nil // a read error leaves the claim to the state machine
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if wt.done || wt.inFlight {
		return nil // settled meanwhile, or in an entry that answers the same
	}
	wt.done = true
	d.remove(wt)
	return got
}

// siblingsOf returns the other waiters held for wt's worker and request
// id: the same claim delivered again (a client's or a forwarder's re-send)
// while an earlier delivery is still held, because its caller stopped
// waiting while its entry was in flight (cancelled), or because its caller
// went away without this leader noticing (a forwarding agent killed, its
// connection not yet closed). When wt's entry leases tasks, each sibling
// is answered the same leases (the state machine answers a re-sent request
// id so); otherwise one sibling (the live re-send) would go on waiting for
// ready work those leases took and answer nothing, and the worker would
// forget the id. Siblings in an entry of their own are left to it (it
// answers the same leases). d.mu must be held.
func (d *Dispatcher) siblingsOf(wt *waiter) []*waiter {
	if wt.w.RequestID == "" {
		return nil
	}
	var out []*waiter
	for _, x := range d.waiters {
		if x != wt && !x.done && !x.inFlight &&
			x.w.WorkerID == wt.w.WorkerID && x.w.RequestID == wt.w.RequestID {
			out = append(out, x)
		}
	}
	return out
}

func (d *Dispatcher) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// remove drops wt from the list; d.mu must be held.
func (d *Dispatcher) remove(wt *waiter) {
	for i, x := range d.waiters {
		if x == wt {
			d.waiters = append(d.waiters[:i], d.waiters[i+1:]...)
			return
		}
	}
}

// failAll ends every waiting claim with err (leadership lost).
func (d *Dispatcher) failAll(err error) {
	d.mu.Lock()
	var ending []*waiter
	for _, wt := range d.waiters {
		if !wt.done { // done is read under d.mu by a claim whose ctx ended
			wt.done = true
			ending = append(ending, wt)
		}
	}
	d.waiters = nil
	d.mu.Unlock()
	for _, wt := range ending {
		wt.ch <- claimOutcome{err: err}
	}
}

// Waiting returns the number of claims being held.
func (d *Dispatcher) Waiting() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.waiters)
}

// WaitingClaims returns the number of long-polling claims held here.
func (n *Node) WaitingClaims() int { return n.disp.Waiting() }

func (d *Dispatcher) run(ctx context.Context) {
	refill := time.NewTimer(time.Hour)
	refill.Stop()
	defer refill.Stop()
	var lastRefill int64
	for {
		changed := d.n.fsm.Changed()
		batch, refillAt := d.servable()
		if len(batch) > 0 {
			d.propose(ctx, batch)
			continue
		}
		// Work held back by a rate limit: sleep until its bucket has a
		// token (no claim entry is proposed for an empty bucket, and no
		// polling), then look at every waiter again.
		var due <-chan time.Time
		if refillAt > 0 {
			if refillAt != lastRefill {
				d.throttled.Add(1)
				lastRefill = refillAt
			}
			refill.Reset(time.Duration(max(refillAt-d.n.cfg.Clock().UnixMilli(), 1)) * time.Millisecond)
			due = refill.C
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-changed:
		case <-due:
			d.forgetEmpty()
			continue
		}
		refill.Stop() // Go 1.23 timers: no stale tick to drain
	}
}

// forgetEmpty lets waiters whose last claim came back empty be proposed
// for again: time passed, a bucket refilled.
func (d *Dispatcher) forgetEmpty() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, wt := range d.waiters {
		wt.emptyAt = 0
	}
}

// ThrottledDispatches counts the times this leader's dispatcher waited for a
// rate limit's bucket to refill before it could serve waiting claims.
func (n *Node) ThrottledDispatches() uint64 { return n.disp.throttled.Load() }

// servable marks and returns the waiters that could get a task now: per
// (queues, types) key, in FIFO order, no more waiters than the tasks ready
// for that key can serve. A claim entry for every free waiter whenever one
// task was ready carried tens of waiters that got nothing, each encoded in
// the entry and looked up on every replica; those still wait, and the next
// commit wakes this loop again if work is left.
//
// With nothing to serve while claims wait, refillAt is when a rate limit
// that holds back ready work next has a token (0: none does).
func (d *Dispatcher) servable() (out []*waiter, refillAt int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	type group struct{ want, ready int }
	groups := map[string]*group{}
	free := make([]*waiter, 0, len(d.waiters))
	now := max(d.n.cfg.Clock().UnixMilli(), d.n.fsm.Now())
	noneReady := false
	defer func() {
		if len(out) == 0 && len(d.waiters) > 0 && !noneReady {
			refillAt = d.n.fsm.ThrottledUntil(now)
		}
	}()
	for _, wt := range d.waiters {
		if wt.done || wt.inFlight || wt.cancelled || (wt.emptyAt != 0 && d.n.fsm.AppliedIndex() <= wt.emptyAt) {
			continue
		}
		g := groups[wt.key]
		if g == nil {
			g = &group{}
			groups[wt.key] = g
		}
		g.want += max(wt.w.Max, 1)
		free = append(free, wt)
	}
	if len(free) == 0 {
		return nil, 0
	}
	if !d.n.fsm.MayHaveReady() {
		// Nothing is ready (the usual case after a commit whose claims
		// rode in it): no counting, and no rate limit holds work back.
		// (Each was a state view and a scan, after every commit.)
		noneReady = true
		return nil, 0
	}
	counted := map[string]bool{}
	for _, wt := range free {
		g := groups[wt.key]
		if !counted[wt.key] {
			counted[wt.key] = true
			g.ready = d.n.fsm.ReadyCount(wt.w, now, g.want)
		}
		if g.ready > 0 {
			g.ready -= max(wt.w.Max, 1)
			wt.inFlight = true
			out = append(out, wt)
		}
	}
	return out, 0
}

func waiterKey(w fsm.Waiter) string {
	k := ""
	for _, q := range w.Queues {
		k += q + ","
	}
	k += "|"
	for _, t := range w.Types {
		k += t + ","
	}
	return k
}

func (d *Dispatcher) propose(ctx context.Context, batch []*waiter) {
	if d.beforePropose != nil {
		d.beforePropose()
	}
	cmd := claimFor(batch)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	res, idx, err := d.n.ProposeGrouped(pctx, cmd)
	cancel()
	d.settle(batch, res, idx, err)
}

func claimFor(batch []*waiter) *fsm.Claim {
	cmd := &fsm.Claim{Waiters: make([]fsm.Waiter, len(batch))}
	for i, wt := range batch {
		cmd.Waiters[i] = wt.w
	}
	return cmd
}

// forGroup takes the waiters free to be served, in FIFO order, until their
// maxes add up to work (the tasks the group-commit entry being built can
// make ready: a submit's tasks, a completion's spawns and a dependent), and
// marks them in flight: that entry claims for them after the commands that
// make the work ready, instead of a claim entry of its own once it is
// applied. Waiters left out (the estimate was low: a completion unblocking
// a fan-out) are served by the dispatcher loop when the entry is applied.
// Nil when no waiter is free.
func (d *Dispatcher) forGroup(work int) []*waiter {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*waiter
	for _, wt := range d.waiters {
		if work <= 0 {
			break
		}
		if wt.done || wt.inFlight || wt.cancelled {
			continue
		}
		wt.inFlight = true
		out = append(out, wt)
		work -= max(wt.w.Max, 1)
	}
	return out
}

// settle hands a claim entry's outcome to its waiters.
func (d *Dispatcher) settle(batch []*waiter, res any, idx uint64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var assigned [][]fsm.Claimed
	if cr, ok := res.(*fsm.ClaimResult); ok && err == nil {
		assigned = cr.Assigned
	}
	for i, wt := range batch {
		wt.inFlight = false
		if wt.done {
			continue
		}
		switch {
		case err != nil:
			wt.done = true
			d.remove(wt)
			wt.ch <- claimOutcome{err: err}
		case i < len(assigned) && len(assigned[i]) > 0:
			wt.done = true
			d.remove(wt)
			for _, x := range d.siblingsOf(wt) {
				x.done = true
				d.remove(x)
				x.ch <- claimOutcome{tasks: assigned[i]}
			}
			wt.ch <- claimOutcome{tasks: assigned[i]}
		case wt.cancelled:
			wt.done = true
			d.remove(wt)
			wt.ch <- claimOutcome{}
		default:
			wt.emptyAt = idx
		}
	}
}
