package fsm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// Semantics of rate limits (token buckets per queue and per type in a queue).

func limitedTasks(n int, queue, typ string) string {
	var b strings.Builder
	b.WriteString(`{"tasks":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"key":"k%03d","type":%q,"queue":%q}`, i, typ, queue)
	}
	b.WriteString("]}")
	return b.String()
}

func (h *harness) queueState(name string) QueueInfo {
	h.t.Helper()
	qs, err := h.f.Queues()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == name {
			return q
		}
	}
	h.t.Fatalf("no queue %s", name)
	return QueueInfo{}
}

func TestRateLimitThrottlesClaimsAndRefillsFromStamps(t *testing.T) {
	h := newSem(t)
	if !h.ok(&RateLimitSet{Queue: "q", RateMilli: 10_000, Burst: 2}).(*ChangedResult).Changed {
		t.Fatal("set: not changed")
	}
	if h.ok(&RateLimitSet{Queue: "q", RateMilli: 10_000, Burst: 2}).(*ChangedResult).Changed {
		t.Fatal("the same limit again changed something")
	}
	h.submit("r", limitedTasks(20, "q", "t"))
	w := Waiter{WorkerID: "w", Max: 100}
	if n := h.f.ReadyCount(w, h.now, 100); n != 2 {
		t.Fatalf("ready count with a full bucket of 2: %d", n)
	}
	if got := h.claim("w", 100); len(got) != 2 {
		t.Fatalf("first claim got %d, want the burst of 2", len(got))
	}
	if n := h.f.ReadyCount(w, h.now, 100); n != 0 {
		t.Fatalf("ready count with an empty bucket: %d", n)
	}
	if at := h.f.ThrottledUntil(h.now); at != h.now+100 {
		t.Fatalf("throttled until %d, want now+100", at-h.now)
	}
	h.wantNoClaim("w")
	h.now += 99
	h.wantNoClaim("w")
	h.now++
	if got := h.claim("w", 100); len(got) != 1 {
		t.Fatalf("after one interval: %d, want 1", len(got))
	}
	h.now += 60_000 // the bucket holds no more than its burst
	if got := h.claim("w", 100); len(got) != 2 {
		t.Fatalf("after a minute: %d, want 2", len(got))
	}
	q := h.queueState("q")
	if q.Leased != 5 || q.Throttled == 0 || q.Limit == nil || q.Limit.RateMilli != 10_000 {
		t.Fatalf("queue record %+v", q.QueueState)
	}
	// Removing the limit lets the rest through at once.
	h.ok(&RateLimitSet{Queue: "q"})
	if got := h.claim("w", 100); len(got) != 15 {
		t.Fatalf("without a limit: %d, want 15", len(got))
	}
	if at := h.f.ThrottledUntil(h.now); at != 0 {
		t.Fatalf("throttled until %d with no limit", at)
	}
	checkDerived(t, h.f)
}

func TestRateLimitPerTypeInAQueue(t *testing.T) {
	h := newSem(t)
	h.ok(&RateLimitSet{Queue: "default", TaskType: "slow", RateMilli: 1_000})
	h.submit("a", limitedTasks(5, "default", "slow"))
	h.submit("b", limitedTasks(5, "default", "fast"))
	got := h.claim("w", 100)
	slow := 0
	for _, c := range got {
		if c.Type == "slow" {
			slow++
		}
	}
	if slow != 1 || len(got) != 6 {
		t.Fatalf("claimed %d slow of %d, want 1 of 6", slow, len(got))
	}
	if n := h.f.ReadyCount(Waiter{WorkerID: "w", Types: []string{"slow"}}, h.now, 10); n != 0 {
		t.Fatalf("ready count for the throttled type: %d", n)
	}
	if at := h.f.ThrottledUntil(h.now); at != h.now+1000 {
		t.Fatalf("throttled until now+%d, want +1000", at-h.now)
	}
	h.now += 1000
	if got := h.claim("w", 100, "slow"); len(got) != 1 {
		t.Fatalf("after a second: %d slow", len(got))
	}
	if q := h.queueState("default"); q.TypeLimits["slow"] == nil || q.Limit != nil {
		t.Fatalf("limits %+v", q.QueueState)
	}
}

func TestRateLimitErrors(t *testing.T) {
	h := newSem(t)
	wantErr(t, h.apply(&RateLimitSet{Queue: "q", RateMilli: -1}), ErrInvalidArgument)
	wantErr(t, h.apply(&RateLimitSet{Queue: "q", RateMilli: 1000, Burst: -1}), ErrInvalidArgument)
	wantErr(t, h.apply(&RateLimitSet{Queue: "bad name", RateMilli: 1000}), ErrInvalidArgument)
	wantErr(t, h.apply(&RateLimitSet{Queue: "q", TaskType: "bad type", RateMilli: 1000}), ErrInvalidArgument)
	if h.ok(&RateLimitSet{Queue: "q"}).(*ChangedResult).Changed {
		t.Fatal("removing an absent limit changed something")
	}
}

// The dispatcher's view: it proposes a claim only when ReadyCount says a
// task can be served, and otherwise sleeps until ThrottledUntil. Driven by
// random claim times over 5 s of a backlogged queue at 20/s, no claim
// entry comes back empty and no 1-second window holds more than 20 leases.
func TestRateLimitDispatchNeverEmptyNeverFaster(t *testing.T) {
	h := newSem(t)
	h.ok(&RateLimitSet{Queue: "q", RateMilli: 20_000})
	h.submit("r", limitedTasks(200, "q", "t"))
	rng := rand.New(rand.NewPCG(7, 11))
	w := Waiter{WorkerID: "w", Max: 8}
	start := h.now
	var leased []int64
	claims := 0
	for h.now < start+5000 {
		if h.f.ReadyCount(w, h.now, 64) == 0 {
			at := h.f.ThrottledUntil(h.now)
			if at <= h.now {
				t.Fatalf("nothing servable and no refill time (%d at %d)", at, h.now)
			}
			h.now = at + int64(rng.IntN(3)) // the timer fires a little late
			continue
		}
		claims++
		got := h.ok(&Claim{Waiters: []Waiter{w}}).(*ClaimResult).Assigned[0]
		if len(got) == 0 {
			t.Fatalf("claim entry %d at +%d ms was empty", claims, h.now-start)
		}
		for range got {
			leased = append(leased, h.now)
		}
		h.now += int64(rng.IntN(40))
	}
	if claims != len(leased) {
		t.Fatalf("%d claim entries for %d leases (burst 1: one each)", claims, len(leased))
	}
	for i := range leased {
		n := 0
		for j := i; j < len(leased) && leased[j] < leased[i]+1000; j++ {
			n++
		}
		if n > 20 {
			t.Fatalf("%d leases in the second from +%d ms", n, leased[i]-start)
		}
	}
	if len(leased) < 80 {
		t.Fatalf("only %d leases in 5 s at 20/s", len(leased))
	}
	for _, r := range []*Task{h.task("r", "k000")} {
		if len(r.Attempts) != 1 || r.Attempts[0].ClaimedAt != start {
			t.Fatalf("first lease %+v", r.Attempts)
		}
	}
}
