package daemon

import (
	"log/slog"
	"os"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
	"github.com/prometheus/client_golang/prometheus"
)

// Adaptive concurrency: queue.set with concurrency "auto", its checks, the
// controller's timing from the environment, and the cap metric.

// checkAutoParams rejects auto bounds that are not valid, and bounds given
// without "auto", before anything is proposed.
func checkAutoParams(p rpc.QueueSetParams) error {
	if !p.Auto {
		if p.Min != 0 || p.Max != 0 || p.TargetLatencyMS != 0 {
			return invalid(`min, max and target_latency_ms go with "concurrency": "auto"; add it, or leave them out for a fixed cap`)
		}
		if p.Concurrency < 0 {
			return invalid("concurrency must be >= 0 (0 = unlimited) or \"auto\"")
		}
		return nil
	}
	cfg := domain.AutoConcurrency{Min: p.Min, Max: p.Max, TargetLatencyMS: p.TargetLatencyMS}
	if cfg.TargetLatencyMS == 0 {
		cfg.TargetLatencyMS = domain.DefaultTargetLatencyMS
	}
	if err := cfg.Validate(); err != nil {
		return invalid(err.Error() + ` (e.g. {"concurrency": "auto", "min": 1, "max": 16})`)
	}
	return nil
}

// concurrencyCmd is the command queue.set's concurrency asks for.
func concurrencyCmd(p rpc.QueueSetParams) fsm.Command {
	if p.Auto {
		return &fsm.QueueAuto{Name: p.Name, Min: p.Min, Max: p.Max, TargetLatencyMS: p.TargetLatencyMS}
	}
	return &fsm.QueueSet{Name: p.Name, Concurrency: p.Concurrency}
}

// autoTiming reads FLOWD_AUTO_CONCURRENCY_PERIOD and
// FLOWD_AUTO_CONCURRENCY_WINDOW (durations; unset: 1 s and 10 s).
func autoTiming(log *slog.Logger) (period, window time.Duration) {
	read := func(name string) time.Duration {
		v := os.Getenv(name)
		if v == "" {
			return 0
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			log.Warn(name+" is not a positive duration (e.g. 1s); using the default", "value", v)
			return 0
		}
		return d
	}
	return read("FLOWD_AUTO_CONCURRENCY_PERIOD"), read("FLOWD_AUTO_CONCURRENCY_WINDOW")
}

// concurrencyCollector exports flowd_queue_concurrency_limit{queue}: each
// queue's effective cap (0 = unlimited), the leader's choice for an auto
// queue, read from this node's replicated state at scrape time.
type concurrencyCollector struct{ a *Agent }

var descQueueConcurrency = prometheus.NewDesc("flowd_queue_concurrency_limit",
	"Effective concurrency cap of a queue (0 = unlimited); for a queue with concurrency auto, the cap the leader's controller set.",
	[]string{"queue"}, nil)

func (c concurrencyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descQueueConcurrency }

func (c concurrencyCollector) Collect(ch chan<- prometheus.Metric) {
	qs, err := c.a.state.Queues()
	if err != nil {
		return
	}
	for _, q := range qs {
		ch <- prometheus.MustNewConstMetric(descQueueConcurrency, prometheus.GaugeValue, float64(q.Concurrency), q.Name)
	}
}
