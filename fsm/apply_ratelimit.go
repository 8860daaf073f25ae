package fsm

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/flowd/flowd/fsm/domain"
)

// Rate limits: a token bucket per queue and per (queue, task type), kept in
// the queue record (domain.RateLimit). The claim takes a token from each
// bucket the task passes through, at the entry's stamped time; a task whose
// bucket is empty stays ready and is not looked at by the claim.

// RateLimitSet sets queue Queue's rate limit, or with Type set the limit of
// that task type's tasks in the queue. RateMilli 0 removes it.
type RateLimitSet struct {
	Stamped
	Queue     string `json:"queue"`
	TaskType  string `json:"type,omitempty"`
	RateMilli int64  `json:"rate_milli"`
	Burst     int    `json:"burst,omitempty"`
}

func (*RateLimitSet) Type() MsgType { return MsgRateLimitSet }

func (a *applier) applyRateLimitSet(c *RateLimitSet) any {
	if err := validName("queue", c.Queue); err != nil {
		return err
	}
	if c.TaskType != "" {
		if err := validName("type", c.TaskType); err != nil {
			return err
		}
	}
	lim, err := domain.NewRateLimit(c.RateMilli, c.Burst)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	q := a.queue(c.Queue)
	old := q.Limit
	if c.TaskType != "" {
		old = q.TypeLimits[c.TaskType]
	}
	if sameLimit(old, lim) {
		return &ChangedResult{}
	}
	if lim != nil {
		lim.TAT = a.now * 1000 // a new limit starts with a full bucket
	}
	if c.TaskType == "" {
		q.Limit = lim
	} else {
		if q.TypeLimits == nil {
			q.TypeLimits = map[string]*domain.RateLimit{}
		}
		if lim == nil {
			delete(q.TypeLimits, c.TaskType)
		} else {
			q.TypeLimits[c.TaskType] = lim
		}
		if len(q.TypeLimits) == 0 {
			q.TypeLimits = nil
		}
	}
	a.emit(Event{Kind: "queue", Name: c.Queue, Queue: c.Queue, Type: c.TaskType, Transition: "set_rate_limit",
		From: limitString(old), To: limitString(lim)})
	return &ChangedResult{Changed: true}
}

func sameLimit(a, b *domain.RateLimit) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.RateMilli == b.RateMilli && a.Burst == b.Burst
}

func limitString(l *domain.RateLimit) string {
	if l == nil {
		return ""
	}
	return strconv.FormatFloat(l.Rate(), 'f', -1, 64) + "/s burst " + strconv.Itoa(l.Burst)
}

// limitAllows reports whether q's buckets hold a token for a task of typ at
// now (nil q: no limit).
func (q *QueueState) limitAllows(typ string, now int64) bool {
	return q.tokens(typ, now) > 0
}

// tokens is how many tasks of typ q's buckets let through at now.
func (q *QueueState) tokens(typ string, now int64) int {
	if q == nil {
		return domain.MaxBurst
	}
	n := domain.MaxBurst
	if q.Limit != nil {
		n = q.Limit.Available(now)
	}
	if tl := q.TypeLimits[typ]; tl != nil {
		n = min(n, tl.Available(now))
	}
	return n
}

// takeToken spends one token of each bucket a task of typ passes.
func (q *QueueState) takeToken(typ string, now int64) {
	q.Leased++
	if q.Limit != nil {
		q.Limit.Take(now, 1)
	}
	if tl := q.TypeLimits[typ]; tl != nil {
		tl.Take(now, 1)
	}
}

// throttledUntil is the earliest time (ms) at which a ready task of q that
// an empty bucket holds back gets a token; 0 if none is held back.
func (q *QueueState) throttledUntil(now int64, serves func(typ string) bool) int64 {
	if q == nil || (q.Limit == nil && q.TypeLimits == nil) {
		return 0
	}
	var at int64
	for typ, n := range q.Types { // a minimum: order does not matter
		if n <= 0 || !serves(typ) || q.tokens(typ, now) > 0 {
			continue
		}
		t := now
		if q.Limit != nil && q.Limit.Available(now) == 0 {
			t = q.Limit.NextAt(now)
		}
		if tl := q.TypeLimits[typ]; tl != nil && tl.Available(now) == 0 {
			t = max(t, tl.NextAt(now))
		}
		if at == 0 || t < at {
			at = t
		}
	}
	return at
}

// throttle notes that a rate limit held back queue qn's work in this claim.
func (a *applier) throttle(qn string) {
	if a.throttled == nil {
		a.throttled = map[string]bool{}
	}
	a.throttled[qn] = true
}

// countThrottled counts one throttled claim per queue noted by throttle.
func (a *applier) countThrottled() {
	names := make([]string, 0, len(a.throttled))
	for qn := range a.throttled {
		names = append(names, qn)
	}
	slices.Sort(names)
	for _, qn := range names {
		a.queue(qn).Throttled++
	}
	a.throttled = nil
}

// ThrottledUntil is the earliest time (ms, after now) at which a rate limit
// that holds back ready work lets a task through: the dispatcher sleeps
// until then instead of proposing claims an empty bucket would leave
// empty. 0: no ready task waits for a token.
func (f *FSM) ThrottledUntil(now int64) int64 {
	var at int64
	_ = f.View(func(r Reader) error {
		return r.Scan(pfxQueue, nil, false, func(_, v []byte) bool {
			var q QueueState
			if unmarshal(v, &q) != nil || !q.Dispatching() || (q.Limit == nil && q.TypeLimits == nil) {
				return true
			}
			if t := q.throttledUntil(now, func(string) bool { return true }); t != 0 && (at == 0 || t < at) {
				at = t
			}
			return true
		})
	})
	return at
}
