package fsm

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// Semantics of adaptive concurrency: QueueAuto sets the bounds and starts
// the cap at the ceiling; QueueCap moves the cap within them and is a lost
// race when the cap it answers has changed; the cap is what dispatch uses.

func TestAutoConcurrencyCapIsWhatDispatchUses(t *testing.T) {
	h := newSem(t)
	if !h.ok(&QueueAuto{Name: "q", Min: 1, Max: 3, TargetLatencyMS: 100}).(*ChangedResult).Changed {
		t.Fatal("auto: not changed")
	}
	if h.ok(&QueueAuto{Name: "q", Min: 1, Max: 3, TargetLatencyMS: 100}).(*ChangedResult).Changed {
		t.Fatal("the same auto bounds again changed something")
	}
	q := h.queueState("q")
	if q.Auto == nil || q.Concurrency != 3 || q.Auto.TargetLatencyMS != 100 {
		t.Fatalf("after auto: cap %d auto %+v, want cap 3 (the ceiling)", q.Concurrency, q.Auto)
	}
	h.ok(&QueueSet{Name: "fixed", Concurrency: 2})
	if aq, err := h.f.AutoQueues(); err != nil || len(aq) != 1 || aq[0].Name != "q" || aq[0].Auto.Max != 3 {
		t.Fatalf("AutoQueues: %+v %v, want only q", aq, err)
	}
	h.submit("r", limitedTasks(10, "q", "t"))
	if got := h.claim("w", 10); len(got) != 3 {
		t.Fatalf("claimed %d at cap 3", len(got))
	}
	// The leader lowers the cap: nothing more is dispatched until the
	// running count falls below it.
	if !h.ok(&QueueCap{Name: "q", From: 3, Cap: 1, LatencyMS: 500, Samples: 3}).(*ChangedResult).Changed {
		t.Fatal("cap 3 -> 1: not changed")
	}
	if q := h.queueState("q"); q.Concurrency != 1 || q.Dispatching() {
		t.Fatalf("cap %d dispatching %v with 3 running, want cap 1 and no dispatch", q.Concurrency, q.Dispatching())
	}
	h.wantNoClaim("w")
	// A change that answers a cap no longer current is a lost race.
	if h.ok(&QueueCap{Name: "q", From: 3, Cap: 2}).(*ChangedResult).Changed {
		t.Fatal("a stale From changed the cap")
	}
	// Outside the bounds: an error result, nothing changes.
	before := stateDigest(t, h.f)
	if _, isErr := h.apply(&QueueCap{Name: "q", From: 1, Cap: 4}).(error); !isErr {
		t.Fatal("cap above the ceiling accepted")
	}
	if stateDigest(t, h.f) != before {
		t.Fatal("a rejected cap changed state")
	}
	if !h.ok(&QueueCap{Name: "q", From: 1, Cap: 3}).(*ChangedResult).Changed {
		t.Fatal("cap 1 -> 3: not changed")
	}
	evs := h.queueEvents("q")
	if !hasQueueTransition(evs, "decrease_concurrency", "3", "1") || !hasQueueTransition(evs, "increase_concurrency", "1", "3") {
		t.Fatalf("events %+v lack the decrease and the increase", evs)
	}
	// A number turns auto off; a later cap change is then a lost race.
	if !h.ok(&QueueSet{Name: "q", Concurrency: 3}).(*ChangedResult).Changed {
		t.Fatal("queue.set 3 on an auto queue with cap 3 did not turn auto off")
	}
	if q := h.queueState("q"); q.Auto != nil || q.Concurrency != 3 {
		t.Fatalf("after queue.set 3: auto %+v cap %d", q.Auto, q.Concurrency)
	}
	if h.ok(&QueueCap{Name: "q", From: 3, Cap: 2}).(*ChangedResult).Changed {
		t.Fatal("a cap change applied to a queue no longer auto")
	}
}

func TestAutoConcurrencyBoundsChangeClampsTheCap(t *testing.T) {
	h := newSem(t)
	h.ok(&QueueSet{Name: "q", Concurrency: 7})
	h.ok(&QueueAuto{Name: "q", Min: 2, Max: 10}) // default target
	if q := h.queueState("q"); q.Concurrency != 10 || q.Auto.TargetLatencyMS != domain.DefaultTargetLatencyMS {
		t.Fatalf("cap %d target %d, want the ceiling 10 and the default target", q.Concurrency, q.Auto.TargetLatencyMS)
	}
	h.ok(&QueueCap{Name: "q", From: 10, Cap: 5})
	h.ok(&QueueAuto{Name: "q", Min: 6, Max: 8, TargetLatencyMS: 50})
	if q := h.queueState("q"); q.Concurrency != 6 {
		t.Fatalf("cap %d after raising the floor to 6, want 6", q.Concurrency)
	}
	for _, bad := range []*QueueAuto{{Name: "q", Min: 0, Max: 4}, {Name: "q", Min: 5, Max: 4}, {Name: "bad name", Min: 1, Max: 2}} {
		res := h.apply(bad)
		if err, isErr := res.(error); !isErr || !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%+v: %v, want an invalid argument", bad, res)
		}
	}
	if h.ok(&QueueCap{Name: "nosuch", From: 0, Cap: 1}).(*ChangedResult).Changed {
		t.Fatal("a cap change created a queue")
	}
}

// TestAutoConcurrencyRandomReplay drives random caps, claims and
// completions; newSem replays the log in random batch sizes and compares
// digests, and the running count never exceeds a cap it was claimed under.
func TestAutoConcurrencyRandomReplay(t *testing.T) {
	h := newSem(t)
	rng := rand.New(rand.NewPCG(54, 55))
	h.ok(&QueueAuto{Name: "q", Min: 1, Max: 6, TargetLatencyMS: 20})
	h.submit("r", limitedTasks(120, "q", "t"))
	var held []Claimed
	for range 300 {
		h.now += int64(rng.IntN(30))
		q := h.queueState("q")
		switch rng.IntN(4) {
		case 0:
			next := domain.NextCap(q.Concurrency, *q.Auto, domain.AutoObservation{Samples: 1,
				LatencyMS: int64(rng.IntN(40)), Running: q.Running, Ready: q.Ready})
			if next != q.Concurrency {
				h.ok(&QueueCap{Name: "q", From: q.Concurrency, Cap: next})
			}
		case 1:
			got := h.claim("w", 1+rng.IntN(4))
			if r := h.queueState("q").Running; len(got) > 0 && r > q.Concurrency {
				t.Fatalf("running %d after a claim under cap %d", r, q.Concurrency)
			}
			held = append(held, got...)
		default:
			if len(held) > 0 {
				i := rng.IntN(len(held))
				h.complete(held[i], `{}`)
				held = append(held[:i], held[i+1:]...)
			}
		}
	}
	var up, down int
	for _, e := range h.queueEvents("q") {
		switch e.Transition {
		case "increase_concurrency":
			up++
		case "decrease_concurrency":
			down++
		}
	}
	if up == 0 || down == 0 {
		t.Fatalf("%d increases and %d decreases: the random walk did not move the cap both ways", up, down)
	}
}

func (h *harness) queueEvents(queue string) []Event {
	h.t.Helper()
	evs, _, err := h.f.Events(0, "", 100000)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []Event
	for _, e := range evs {
		if e.Kind == "queue" && e.Name == queue {
			out = append(out, e)
		}
	}
	return out
}

func hasQueueTransition(evs []Event, transition, from, to string) bool {
	for _, e := range evs {
		if e.Transition == transition && e.From == from && e.To == to {
			return true
		}
	}
	return false
}
