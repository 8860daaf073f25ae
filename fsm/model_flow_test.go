package fsm

import (
	"errors"
	"fmt"

	"github.com/flowd/flowd/fsm/domain"
	"pgregory.net/rapid"
)

// The model's flow control: rate limits (MsgRateLimitSet) and adaptive
// concurrency (MsgQueueAuto, MsgQueueCap, and QueueSet turning it off) of
// the model's one queue. The model keeps its own token buckets, as a level
// and a refill credit rather than the state machine's theoretical arrival
// time, and predicts how many tasks every claim leases: no more than the
// queue's bucket, the bucket of each task's type (a compensation's is its
// revert_type) and the cap's free slots allow, at the entry's stamp.

// mBucket is a token bucket: Level tokens (at most Burst), plus Credit µs
// towards the next one (one per Interval µs), as of At (µs). Independent
// bookkeeping of the same limit: leases since it was set never exceed
// Burst + elapsed × rate.
type mBucket struct {
	rateMilli int64
	burst     int
	interval  int64 // µs per token, rounded up (a limit is never exceeded by rounding)
	level     int
	credit    int64
	at        int64
	setAt     int64 // µs: when the limit was set (full)
	taken     int   // tokens taken since
}

func newMBucket(rateMilli int64, burst int, nowMS int64) *mBucket {
	burst = max(burst, 1)
	return &mBucket{rateMilli: rateMilli, burst: burst, interval: (1_000_000_000 + rateMilli - 1) / rateMilli,
		level: burst, at: nowMS * 1000, setAt: nowMS * 1000}
}

// refill brings the bucket to nowMS.
func (b *mBucket) refill(nowMS int64) {
	now := nowMS * 1000
	if now <= b.at {
		return
	}
	b.credit += now - b.at
	b.at = now
	b.level += int(b.credit / b.interval)
	b.credit %= b.interval
	if b.level >= b.burst {
		b.level, b.credit = b.burst, 0 // a full bucket banks nothing more
	}
}

func (b *mBucket) tokens(nowMS int64) int {
	if b == nil {
		return domain.MaxBurst
	}
	b.refill(nowMS)
	return b.level
}

func (b *mBucket) take(nowMS int64) {
	if b == nil {
		return
	}
	b.refill(nowMS)
	b.level--
	b.taken++
}

type mAuto struct {
	min, max int
	target   int64
}

type mFlow struct {
	qLimit   *mBucket            // the queue's bucket
	tLimits  map[string]*mBucket // by task type
	capacity int                 // the queue's cap (0: none); an auto queue's effective cap
	auto     *mAuto
}

// flowBudget is how many of the dispatchable tasks (counted by dispatch
// type) the limits and the cap let a claim lease now, whatever the order it
// picks them in: one queue token and one cap slot per lease, and per type
// no more than its bucket holds.
func (m *model) flowBudget(avail map[string]int, running int) int {
	now := m.now()
	perType := 0
	for typ, n := range avail {
		perType += min(n, m.tLimits[typ].tokens(now))
	}
	budget := min(perType, m.qLimit.tokens(now))
	if m.capacity > 0 {
		budget = min(budget, max(m.capacity-running, 0))
	}
	return budget
}

// flowTake spends the tokens of one lease of a task of dispatch type typ.
func (m *model) flowTake(typ string) {
	m.qLimit.take(m.now())
	m.tLimits[typ].take(m.now())
}

func (m *model) leasedCount() int {
	n := 0
	for _, t := range m.all() {
		if t.leased {
			n++
		}
	}
	return n
}

func (m *model) rateLimit(rt *rapid.T) {
	typ := rapid.SampledFrom([]string{"", "a", "b", "undo"}).Draw(rt, "limit_type")
	rate := rapid.SampledFrom([]int64{0, 500, 1000, 2000, 10_000}).Draw(rt, "rate_milli")
	burst := rapid.IntRange(0, 3).Draw(rt, "burst")
	if rate == 0 {
		burst = 0
	}
	old := m.qLimit
	if typ != "" {
		old = m.tLimits[typ]
	}
	var lim *mBucket
	if rate != 0 {
		lim = newMBucket(rate, burst, m.now())
	}
	want := !(old == nil && lim == nil) && (old == nil || lim == nil || old.rateMilli != lim.rateMilli || old.burst != lim.burst)
	changed := m.h.ok(&RateLimitSet{Queue: domain.DefaultQueue, TaskType: typ, RateMilli: rate, Burst: burst}).(*ChangedResult).Changed
	if changed != want {
		rt.Fatalf("rate limit %q %d/%d: changed %v, want %v", typ, rate, burst, changed, want)
	}
	if !want {
		return // an unchanged limit keeps its bucket
	}
	if typ == "" {
		m.qLimit = lim
		return
	}
	if m.tLimits == nil {
		m.tLimits = map[string]*mBucket{}
	}
	if lim == nil {
		delete(m.tLimits, typ)
	} else {
		m.tLimits[typ] = lim
	}
}

func (m *model) queueAuto(rt *rapid.T) {
	lo := rapid.IntRange(0, 3).Draw(rt, "auto_min")
	hi := rapid.IntRange(lo-1, 4).Draw(rt, "auto_max")
	target := rapid.SampledFrom([]int64{0, 100, 1000}).Draw(rt, "target_ms")
	res := m.h.apply(&QueueAuto{Name: domain.DefaultQueue, Min: lo, Max: hi, TargetLatencyMS: target})
	if target == 0 {
		target = domain.DefaultTargetLatencyMS
	}
	if lo < 1 || hi < lo {
		if err, ok := res.(error); !ok || !errors.Is(err, ErrInvalidArgument) {
			rt.Fatalf("auto %d..%d: %v, want an invalid argument", lo, hi, res)
		}
		return
	}
	cfg := mAuto{min: lo, max: hi, target: target}
	want := m.auto == nil || *m.auto != cfg
	if c, ok := res.(*ChangedResult); !ok || c.Changed != want {
		rt.Fatalf("auto %+v: %v, want changed %v", cfg, res, want)
	}
	if !want {
		return
	}
	if m.auto == nil {
		m.capacity = hi // a queue new to auto starts at its ceiling
	} else {
		m.capacity = min(max(m.capacity, lo), hi)
	}
	m.auto = &cfg
}

// queueCap is the leader controller's proposal: sometimes answering a cap
// that is no longer current (a lost race), sometimes out of bounds.
func (m *model) queueCap(rt *rapid.T) {
	from := m.capacity + rapid.IntRange(-1, 1).Draw(rt, "cap_from_delta")
	to := rapid.IntRange(0, 5).Draw(rt, "cap")
	res := m.h.apply(&QueueCap{Name: domain.DefaultQueue, From: from, Cap: to, LatencyMS: 50, Samples: 3})
	switch {
	case m.auto == nil || from != m.capacity || to == from:
		if c, ok := res.(*ChangedResult); !ok || c.Changed {
			rt.Fatalf("cap %d->%d (auto %v, cap %d): %v, want a lost race", from, to, m.auto, m.capacity, res)
		}
	case to < m.auto.min || to > m.auto.max:
		if err, ok := res.(error); !ok || !errors.Is(err, ErrInvalidArgument) {
			rt.Fatalf("cap %d outside %d..%d: %v, want an invalid argument", to, m.auto.min, m.auto.max, res)
		}
	default:
		if c, ok := res.(*ChangedResult); !ok || !c.Changed {
			rt.Fatalf("cap %d->%d: %v, want changed", from, to, res)
		}
		m.capacity = to
	}
}

// queueSet sets a fixed cap, which turns auto off.
func (m *model) queueSet(rt *rapid.T) {
	n := rapid.IntRange(0, 3).Draw(rt, "concurrency")
	want := m.capacity != n || m.auto != nil
	if changed := m.h.ok(&QueueSet{Name: domain.DefaultQueue, Concurrency: n}).(*ChangedResult).Changed; changed != want {
		rt.Fatalf("queue set %d: changed %v, want %v", n, changed, want)
	}
	m.capacity, m.auto = n, nil
}

// checkFlow compares the queue record's limits and cap with the model's,
// and checks that no bucket let more leases out than its rate allows.
func (m *model) checkFlow(rt *rapid.T, q *QueueState) {
	if q == nil {
		if m.qLimit != nil || len(m.tLimits) > 0 || m.auto != nil || m.capacity != 0 {
			rt.Fatalf("no queue record, model has limits or a cap")
		}
		return
	}
	same := func(name string, got *domain.RateLimit, want *mBucket) {
		if (got == nil) != (want == nil) || (got != nil && (got.RateMilli != want.rateMilli || got.Burst != want.burst)) {
			rt.Fatalf("limit %s: %+v, model %+v", name, got, want)
		}
		if want == nil {
			return
		}
		now := m.now() * 1000
		if allowed := int64(want.burst) + (now-want.setAt)*want.rateMilli/1_000_000_000; int64(want.taken) > allowed {
			rt.Fatalf("limit %s: %d leases in %d µs since it was set, at most %d allowed", name, want.taken, now-want.setAt, allowed)
		}
		if got.Available(m.now()) != want.tokens(m.now()) {
			rt.Fatalf("limit %s: %d tokens now, model %d", name, got.Available(m.now()), want.tokens(m.now()))
		}
	}
	same("queue", q.Limit, m.qLimit)
	for _, typ := range []string{"a", "b", "undo"} {
		same(fmt.Sprintf("type %s", typ), q.TypeLimits[typ], m.tLimits[typ])
	}
	if len(q.TypeLimits) != len(m.tLimits) {
		rt.Fatalf("type limits %v, model %v", q.TypeLimits, m.tLimits)
	}
	if q.Concurrency != m.capacity {
		rt.Fatalf("queue cap %d, model %d", q.Concurrency, m.capacity)
	}
	if (q.Auto == nil) != (m.auto == nil) ||
		(q.Auto != nil && (q.Auto.Min != m.auto.min || q.Auto.Max != m.auto.max || q.Auto.TargetLatencyMS != m.auto.target)) {
		rt.Fatalf("queue auto %+v, model %+v", q.Auto, m.auto)
	}
	if m.auto != nil && (q.Concurrency < m.auto.min || q.Concurrency > m.auto.max) {
		rt.Fatalf("auto cap %d outside %d..%d", q.Concurrency, m.auto.min, m.auto.max)
	}
}
