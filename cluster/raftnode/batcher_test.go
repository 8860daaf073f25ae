package raftnode

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm"
)

// Concurrent grouped proposals each get their own result, and share
// entries: fewer log entries than commands.
func TestProposeGroupedCoalesces(t *testing.T) {
	c := NewTestCluster(t, 3, func(cfg *Config) { cfg.DisableLoops = true })
	spec := mustSpec(t, `{"tasks":[{"key":"x","type":"t"}]}`)
	const n = 60
	l := c.Leader()
	before := l.GroupCommit()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	idx := make([]uint64, n)
	errs := make([]error, n)
	results := make([]any, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], idx[i], errs[i] = l.ProposeGrouped(ctx, &fsm.Submit{ID: fmt.Sprintf("g%02d", i), Spec: spec})
		}(i)
	}
	wg.Wait()
	entries := map[uint64]bool{}
	for i := 0; i < n; i++ {
		if errs[i] != nil {
			t.Fatalf("%d: %v", i, errs[i])
		}
		if r := results[i].(*fsm.SubmitResult); r.ID != fmt.Sprintf("g%02d", i) || !r.Created {
			t.Fatalf("%d got %+v", i, r)
		}
		entries[idx[i]] = true
	}
	if len(entries) >= n {
		t.Fatalf("%d commands used %d entries: nothing was grouped", n, len(entries))
	}
	// The totals count what was proposed: every command once, one entry
	// per distinct index, each entry's round trip.
	st := l.GroupCommit()
	if got := st.Commands - before.Commands; got != n {
		t.Fatalf("group commit counted %d commands, want %d", got, n)
	}
	if got := st.Entries - before.Entries; got != uint64(len(entries)) {
		t.Fatalf("group commit counted %d entries, want %d (distinct indexes)", got, len(entries))
	}
	if st.Propose <= before.Propose || st.LingersFilled > st.Lingers || (st.Lingers > before.Lingers) != (st.Linger > before.Linger) {
		t.Fatalf("group commit times inconsistent: before %+v after %+v", before, st)
	}
	// A rejected command in a group fails alone.
	res, _, err := l.ProposeGrouped(ctx, &fsm.Submit{ID: "bad/id", Spec: spec})
	if err == nil {
		t.Fatalf("invalid id accepted: %+v", res)
	}
	if got := len(l.FSM().RunIDs()); got != n {
		t.Fatalf("%d runs, want %d", got, n)
	}
	assertConverged(t, c)
}

// A claim waiting when a submit is proposed is served by the submit's own
// entry (its fencing token is that entry's index), not by a claim entry
// proposed after the submit was applied: one raft round from submit to
// lease.
func TestWaitingClaimRidesWithTheSubmit(t *testing.T) {
	c := NewTestCluster(t, 3, nil)
	l := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.WaitLeaderReady(ctx); err != nil {
		t.Fatal(err)
	}
	type out struct {
		got []fsm.Claimed
		err error
	}
	ch := make(chan out, 1)
	go func() {
		got, err := l.Claim(ctx, fsm.Waiter{WorkerID: "w", Max: 1}, time.Second)
		ch <- out{got, err}
	}()
	waitHeld(t, l, 1)
	res, idx, err := l.ProposeGrouped(ctx, &fsm.Submit{ID: "r", Spec: mustSpec(t, `{"tasks":[{"key":"x","type":"t"}]}`)})
	if err != nil || !res.(*fsm.SubmitResult).Created {
		t.Fatalf("submit: %v %v", res, err)
	}
	o := <-ch
	if o.err != nil || len(o.got) != 1 {
		t.Fatalf("claim: %+v %v", o.got, o.err)
	}
	if o.got[0].FencingToken != idx {
		t.Fatalf("claimed under token %d, the submit's entry is %d: the claim took an entry of its own", o.got[0].FencingToken, idx)
	}
}

// Grouping never turns valid requests into an oversized entry: sixteen
// concurrent submits with ~900 KB inputs each (the documented limit is
// 1 MiB) all succeed, in groups closed before they outgrow one entry.
func TestGroupsCloseBeforeTheyOutgrowAnEntry(t *testing.T) {
	c := NewTestCluster(t, 3, func(cfg *Config) {
		cfg.DisableLoops = true
		// Megabytes per entry under the race detector on two cores: give
		// raft room, this test is about grouping, not elections.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 3*time.Second, 3*time.Second, 2*time.Second
	})
	l := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	big := `{"pad":"` + strings.Repeat("x", 900<<10) + `"}`
	spec := mustSpec(t, `{"tasks":[{"key":"x","type":"t","input":`+big+`}]}`)
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	idx := make([]uint64, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, idx[i], errs[i] = l.ProposeGrouped(ctx, &fsm.Submit{ID: fmt.Sprintf("big%02d", i), Spec: spec})
		}()
	}
	wg.Wait()
	perEntry := map[uint64]int{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
		perEntry[idx[i]]++
	}
	for e, k := range perEntry {
		if k*900<<10 > maxGroupBytes+(1<<20) {
			t.Fatalf("entry %d carried %d large submits", e, k)
		}
	}
}

// A group-commit entry that makes one task ready claims for one waiter,
// not for every waiter held: the others are neither encoded in the entry
// nor looked up by the replicas (a waiter a claim entry gave nothing is
// marked with that entry's index; none may be).
func TestClaimEntryCarriesOnlyTheWaitersItCanServe(t *testing.T) {
	c := NewTestCluster(t, 3, nil)
	l := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.WaitLeaderReady(ctx); err != nil {
		t.Fatal(err)
	}
	const waiters = 8
	got := make(chan []fsm.Claimed, waiters)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	for i := range waiters {
		go func() {
			tasks, _ := l.Claim(wctx, fsm.Waiter{WorkerID: fmt.Sprint("w", i), Max: 1}, time.Second)
			got <- tasks
		}()
	}
	waitHeld(t, l, waiters)
	_, idx, err := l.ProposeGrouped(ctx, &fsm.Submit{ID: "r", Spec: mustSpec(t, `{"tasks":[{"key":"x","type":"t"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if tasks := <-got; len(tasks) != 1 || tasks[0].FencingToken != idx {
		t.Fatalf("claimed %+v, want the task under the submit's entry %d", tasks, idx)
	}
	if err := l.WaitForApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	d := l.disp
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.waiters) != waiters-1 {
		t.Fatalf("%d waiters held, want %d", len(d.waiters), waiters-1)
	}
	for _, wt := range d.waiters {
		if wt.emptyAt != 0 || wt.inFlight {
			t.Fatalf("waiter %s was proposed for with nothing to get (empty at %d, in flight %v)", wt.w.WorkerID, wt.emptyAt, wt.inFlight)
		}
	}
}

// Only a busy group makes the next one linger, for lingerRounds of its
// commit time at most and never longer than maxLinger.
func TestLingerOnlyAfterABusyGroup(t *testing.T) {
	for _, c := range []struct {
		last int
		took time.Duration
		want time.Duration
	}{
		{0, time.Millisecond, 0},
		{1, 3 * time.Millisecond, 0},
		{lingerMinGroup - 1, 3 * time.Millisecond, 0},
		{lingerMinGroup, time.Millisecond, 4 * time.Millisecond},
		{lingerMinGroup, 3 * time.Millisecond, maxLinger},
		{maxGroup, time.Second, maxLinger},
	} {
		if got := lingerFor(c.last, c.took); got != c.want {
			t.Errorf("lingerFor(%d, %v) = %v, want %v", c.last, c.took, got, c.want)
		}
	}
}

// A lingering flusher goes on as soon as the queue is as long as it waits
// for, not at the end of its linger.
func TestLingerEndsWhenTheQueueFills(t *testing.T) {
	b := newBatcher(nil)
	b.flushing = maxFlushers // no flusher is started: the test is the flusher
	done := make(chan bool, 1)
	go func() { done <- b.awaitQueue(3, time.Hour) }()
	for range 3 {
		if b.enqueue(&groupReq{}) {
			t.Fatal("enqueue asked for a second flusher")
		}
	}
	select {
	case filled := <-done:
		if !filled {
			t.Fatal("awaitQueue reported a timeout, want filled")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("awaitQueue still waiting with 3 of 3 requests queued")
	}
	if b.want != 0 || len(b.filled) != 0 {
		t.Fatalf("after the wait: want %d, %d signals pending; want none", b.want, len(b.filled))
	}
}

// A linger nobody fills ends at its bound, and leaves no wait armed: later
// requests signal nobody.
func TestLingerGivesUpAtItsBound(t *testing.T) {
	b := newBatcher(nil)
	b.flushing = maxFlushers
	b.enqueue(&groupReq{})
	if b.awaitQueue(4, 10*time.Millisecond) {
		t.Fatal("awaitQueue reported filled with 1 of 4 requests queued")
	}
	for range 4 {
		b.enqueue(&groupReq{})
	}
	if b.want != 0 || len(b.filled) != 0 {
		t.Fatalf("after the timeout: want %d, %d signals pending; want none", b.want, len(b.filled))
	}
	if !b.awaitQueue(4, time.Hour) {
		t.Fatal("awaitQueue waited with 5 of 4 requests queued")
	}
}

// A group's linger counts only the callers coming back: those the last two
// groups answered (their requests, and the waiting claims that rode in
// them), and callers the node cannot tell (nil). A paced caller, not
// answered lately, makes no wave to wait for.
func TestLingerCountsTheCallersComingBack(t *testing.T) {
	b := newBatcher(nil)
	for i, s := range []struct {
		callers []any
		want    int
	}{
		{[]any{"p1", "p2", "w1", "w2"}, 0}, // nobody was answered yet
		{[]any{"w1", "w2", "p3"}, 2},       // the workers come back; p3 is new
		{[]any{"p1", "w1", "w2", nil}, 4},  // p1 two groups ago, the workers last; nil counts
		{[]any{"p2", "p3"}, 1},             // p3 two groups ago; p2 three
		{[]any{"w1", "w2", "w3"}, 2},       // w1, w2 two groups ago; w3 is new
		{[]any{"w3", "p2"}, 2},             // w3 last, p2 two groups ago
	} {
		group := make([]*groupReq, len(s.callers))
		for j, c := range s.callers {
			group[j] = &groupReq{caller: c}
		}
		if got := b.returning(group); got != s.want {
			t.Fatalf("group %d %v: %d returning, want %d", i, s.callers, got, s.want)
		}
	}
	// A waiting claim that rides in a group is answered by it: the worker
	// it serves comes back with its completion.
	b.returning([]*groupReq{{caller: "p1"}})
	b.answering([]*waiter{{caller: "w7"}, {caller: nil}})
	if got := b.returning([]*groupReq{{caller: "w7"}, {caller: "w8"}}); got != 1 {
		t.Fatalf("after a group whose rider served w7: %d returning of w7, w8, want 1", got)
	}
}

// The flusher lingers after a busy group only when its callers come back:
// a group of eight callers nobody answered lately (paced producers) makes
// no linger, the same eight again do, and callers the node cannot name
// count as coming back.
func TestFlusherLingersOnlyForCallersComingBack(t *testing.T) {
	c := NewTestCluster(t, 3, func(cfg *Config) { cfg.DisableLoops = true })
	b := c.Leader().batch
	noop, err := fsm.Encode(&fsm.Noop{})
	if err != nil {
		t.Fatal(err)
	}
	group := func(callers ...any) uint64 {
		b.mu.Lock()
		b.flushing = maxFlushers // queued without a flusher: this goroutine is it
		b.mu.Unlock()
		reqs := make([]*groupReq, len(callers))
		for i, who := range callers {
			reqs[i] = &groupReq{buf: noop, caller: who, done: make(chan groupResp, 1)}
			b.enqueue(reqs[i])
		}
		before := b.stats.lingers.Load()
		b.flush() // one entry, then its linger (if any) ends at its bound: nothing else is queued
		for i, r := range reqs {
			if out := <-r.done; out.err != nil {
				t.Fatalf("request %d: %v", i, out.err)
			}
		}
		return b.stats.lingers.Load() - before
	}
	callers := []any{"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"}
	if n := group(callers...); n != 0 {
		t.Fatalf("a group of %d callers not answered lately lingered %d times, want 0", len(callers), n)
	}
	if n := group(callers...); n != 1 {
		t.Fatalf("the same %d callers coming back lingered %d times, want 1", len(callers), n)
	}
	if n := group(nil, nil, nil, nil, nil, nil, nil, nil); n != 1 {
		t.Fatalf("8 callers the node cannot name lingered %d times, want 1", n)
	}
}

// A group's submits go ahead of its other commands, each kind in its own
// order, but never past an earlier command of their own caller or of one
// the node cannot name.
func TestOrderGroupPutsSubmitsFirst(t *testing.T) {
	b := newBatcher(nil) // one batcher for every group: order's scratch is reused
	type cmd struct {
		name   string
		caller any
		submit bool
	}
	s := func(name string, caller any) cmd { return cmd{name, caller, true} }
	o := func(name string, caller any) cmd { return cmd{name, caller, false} }
	for _, c := range []struct {
		group []cmd
		want  string
	}{
		{[]cmd{o("c1", "w1"), s("s1", "p1"), o("c2", "w2"), s("s2", "p2")}, "s1 s2 c1 c2"},
		{[]cmd{s("s1", "p1"), s("s2", "p2"), o("c1", "w1")}, "s1 s2 c1"},                                     // already in order
		{[]cmd{o("c1", "p1"), s("s1", "p1"), s("s2", "p2")}, "s2 c1 s1"},                                     // s1 stays behind its caller's c1
		{[]cmd{o("c1", nil), s("s1", "p1"), s("s2", "p2")}, "c1 s1 s2"},                                      // nothing passes an unknown caller
		{[]cmd{s("s0", nil), o("c1", "w1"), s("s1", "p1")}, "s0 c1 s1"},                                      // an unknown caller's submit stays, and holds back what follows
		{[]cmd{o("c1", "w1"), o("c2", "w2"), s("s1", "p1"), o("c3", "p1"), s("s2", "p1")}, "s1 c1 c2 c3 s2"}, // s2 behind p1's c3
	} {
		batch := make([]*groupReq, len(c.group))
		for i, x := range c.group {
			batch[i] = &groupReq{buf: []byte(x.name), caller: x.caller, submit: x.submit}
		}
		b.order(batch)
		var got []string
		for _, r := range batch {
			got = append(got, string(r.buf))
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%v: ordered %v, want %s", c.group, got, c.want)
		}
	}
}

// A completion that claims its worker's next task takes the task that a
// submit of its own group makes ready, though the submit came after it:
// its worker gets the work in the completion's answer instead of asking
// again.
func TestCompletionClaimsWhatItsGroupSubmits(t *testing.T) {
	c := NewTestCluster(t, 3, func(cfg *Config) { cfg.DisableLoops = true })
	l := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	spec := mustSpec(t, `{"tasks":[{"key":"x","type":"t"}]}`)
	if _, _, err := l.ProposeGrouped(ctx, &fsm.Submit{ID: "r0", Spec: spec}); err != nil {
		t.Fatal(err)
	}
	held, _, err := l.ProposeGrouped(ctx, &fsm.Claim{Waiters: []fsm.Waiter{{WorkerID: "w", Types: []string{"t"}, Max: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	task := held.(*fsm.ClaimResult).Assigned[0][0]
	enc := func(cmd fsm.Command) []byte {
		cmd.Stamp(l.cfg.Clock().UnixMilli())
		buf, err := fsm.Encode(cmd)
		if err != nil {
			t.Fatal(err)
		}
		return buf
	}
	b := l.batch
	b.mu.Lock()
	b.flushing = maxFlushers // queued without a flusher: this goroutine is it
	b.mu.Unlock()
	complete := &groupReq{caller: "worker", done: make(chan groupResp, 1),
		buf: enc(&fsm.Complete{TaskID: task.TaskID, Token: task.FencingToken, Claim: &fsm.Waiter{WorkerID: "w", Types: []string{"t"}, Max: 1}})}
	submit := &groupReq{caller: "producer", submit: true, work: 1, done: make(chan groupResp, 1), buf: enc(&fsm.Submit{ID: "r1", Spec: spec})}
	b.enqueue(complete)
	b.enqueue(submit)
	b.flush()
	sub, ack := <-submit.done, <-complete.done
	if sub.err != nil || ack.err != nil || sub.idx != ack.idx {
		t.Fatalf("submit %+v, completion %+v: want both applied in one entry", sub, ack)
	}
	got := ack.res.(*fsm.AckResult)
	if !got.Accepted || len(got.Claimed) != 1 || got.Claimed[0].RunID != "r1" {
		t.Fatalf("the completion's claim got %+v, want r1's task (submitted in its group)", got)
	}
}
