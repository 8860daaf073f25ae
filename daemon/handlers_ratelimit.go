package daemon

import (
	"context"
	"math"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
	"github.com/prometheus/client_golang/prometheus"
)

// Rate limits: queue.set with rate (and burst, type), queue.list's
// rate_limit / type_limits, and their metrics.

func (a *Agent) queueSetRate(ctx context.Context, p rpc.QueueSetParams) (rpc.ChangedResult, error) {
	if p.Rate == nil {
		return rpc.ChangedResult{}, invalid("burst and type set a rate limit: give rate too (tasks per second, 0 removes the limit)")
	}
	rate := *p.Rate
	if math.IsNaN(rate) || rate < 0 || rate > domain.MaxRateMilli/1000 {
		return rpc.ChangedResult{}, invalid("rate must be 0 (no limit) to 1000000 tasks per second")
	}
	milli := int64(math.Round(rate * 1000))
	if rate > 0 && milli == 0 {
		return rpc.ChangedResult{}, invalid("rate must be at least 0.001 per second (0 removes the limit)")
	}
	if p.Burst < 0 || p.Burst > domain.MaxBurst {
		return rpc.ChangedResult{}, invalid("burst must be 0 (the default, 1) to 1000000")
	}
	if milli == 0 && p.Burst != 0 {
		return rpc.ChangedResult{}, invalid("burst needs a rate above 0")
	}
	if p.Concurrency < 0 {
		return rpc.ChangedResult{}, invalid("concurrency must be >= 0 (0 = unlimited)")
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodQueueSet, p, func(ctx context.Context) (rpc.ChangedResult, error) {
		out := rpc.ChangedResult{}
		if p.Concurrency != 0 || p.Auto {
			res, idx, err := propose[fsm.ChangedResult](ctx, a.prop, concurrencyCmd(p), alone)
			if err != nil {
				return out, err
			}
			out.Changed, out.Index = res.Changed, idx
		}
		res, idx, err := propose[fsm.ChangedResult](ctx, a.prop, &fsm.RateLimitSet{Queue: p.Name, TaskType: p.Type, RateMilli: milli, Burst: p.Burst}, alone)
		if err != nil {
			return out, err
		}
		out.Changed, out.Index = out.Changed || res.Changed, idx
		return out, nil
	})
}

func toRateLimit(l *domain.RateLimit, now int64) rpc.RateLimit {
	return rpc.RateLimit{Rate: l.Rate(), Burst: l.Burst, Tokens: l.Available(now)}
}

func addRateLimits(rq *rpc.Queue, q fsm.QueueState, now int64) {
	rq.Leased, rq.Throttled = q.Leased, q.Throttled
	if q.Limit != nil {
		l := toRateLimit(q.Limit, now)
		rq.RateLimit = &l
	}
	for typ, l := range q.TypeLimits {
		if rq.TypeLimits == nil {
			rq.TypeLimits = map[string]rpc.RateLimit{}
		}
		rq.TypeLimits[typ] = toRateLimit(l, now)
	}
}

// rateLimitCollector exports the queues' replicated lease and throttle
// counters and limits (the same on every node) and the leader's count of
// dispatcher waits for a refill (this node, while it leads).
type rateLimitCollector struct{ a *Agent }

var (
	descQueueLeased    = prometheus.NewDesc("flowd_queue_leases_total", "Leases a queue granted, cluster-wide (its rate is the queue's current dispatch rate).", []string{"queue"}, nil)
	descQueueThrottled = prometheus.NewDesc("flowd_queue_throttled_claims_total", "Claim entries that found a queue's ready work held back by a rate limit, cluster-wide.", []string{"queue"}, nil)
	descQueueRate      = prometheus.NewDesc("flowd_queue_rate_limit", "A queue's rate limit in tasks per second (type \"\" for the queue's own bucket).", []string{"queue", "type"}, nil)
	descRefillWaits    = prometheus.NewDesc("flowd_dispatch_refill_waits_total", "Times this node's dispatcher, as leader, waited for a rate limit's bucket to refill instead of proposing a claim.", nil, nil)
)

func (c rateLimitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descQueueLeased
	ch <- descQueueThrottled
	ch <- descQueueRate
	ch <- descRefillWaits
}

func (c rateLimitCollector) Collect(ch chan<- prometheus.Metric) {
	if c.a.node != nil {
		ch <- prometheus.MustNewConstMetric(descRefillWaits, prometheus.CounterValue, float64(c.a.node.ThrottledDispatches()))
	}
	qs, err := c.a.state.Queues()
	if err != nil {
		return
	}
	for _, q := range qs {
		ch <- prometheus.MustNewConstMetric(descQueueLeased, prometheus.CounterValue, float64(q.Leased), q.Name)
		ch <- prometheus.MustNewConstMetric(descQueueThrottled, prometheus.CounterValue, float64(q.Throttled), q.Name)
		if q.Limit != nil {
			ch <- prometheus.MustNewConstMetric(descQueueRate, prometheus.GaugeValue, q.Limit.Rate(), q.Name, "")
		}
		for typ, l := range q.TypeLimits {
			ch <- prometheus.MustNewConstMetric(descQueueRate, prometheus.GaugeValue, l.Rate(), q.Name, typ)
		}
	}
}
