package tui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowd/flowd/rpc"
)

// Rate limits on the queues screen: the LIMIT column, and in the detail the
// buckets, their tokens and the current lease rate (from the replicated
// lease counter between two loads of queue.list).

// leaseSample is a queue's lease counter at a load, and the rate since the
// load before it.
type leaseSample struct {
	n    uint64
	at   time.Time
	rate float64
	ok   bool
}

func (m *queuesModel) sampleLeases() {
	if m.leases == nil {
		m.leases = map[string]leaseSample{}
	}
	now := m.Now()
	for _, q := range m.queues {
		prev, seen := m.leases[q.Name]
		cur := leaseSample{n: q.Leased, at: now, rate: prev.rate, ok: prev.ok}
		if dt := now.Sub(prev.at).Seconds(); seen && dt >= 0.5 && q.Leased >= prev.n {
			cur.rate, cur.ok = float64(q.Leased-prev.n)/dt, true
		} else if seen && dt < 0.5 {
			cur = prev // too close to the last sample to say anything
		}
		m.leases[q.Name] = cur
	}
}

func perSecond(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) + "/s" }

// limitCell is the queue's own limit, "type*" when only types are limited.
func limitCell(q *rpc.Queue) string {
	switch {
	case q.RateLimit != nil:
		return perSecond(q.RateLimit.Rate)
	case len(q.TypeLimits) > 0:
		return "types"
	}
	return "-"
}

// limitDetail describes the queue's buckets for the detail line.
func (m *queuesModel) limitDetail(q rpc.Queue) string {
	var parts []string
	one := func(name string, l rpc.RateLimit) string {
		return fmt.Sprintf("%s %s burst %d (%d tokens)", name, perSecond(l.Rate), l.Burst, l.Tokens)
	}
	if q.RateLimit != nil {
		parts = append(parts, one("limit", *q.RateLimit))
	}
	for _, typ := range slices.Sorted(func(yield func(string) bool) {
		for k := range q.TypeLimits {
			if !yield(k) {
				return
			}
		}
	}) {
		parts = append(parts, one(typ, q.TypeLimits[typ]))
	}
	if s := m.leases[q.Name]; s.ok {
		parts = append(parts, fmt.Sprintf("leasing %.1f/s", s.rate))
	}
	if q.Throttled > 0 {
		parts = append(parts, itoa(int(q.Throttled))+" throttled claims")
	}
	if len(parts) == 0 {
		return ""
	}
	return " · " + strings.Join(parts, " · ")
}
