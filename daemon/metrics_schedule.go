package daemon

import "github.com/prometheus/client_golang/prometheus"

// scheduleCollector exports the schedules' replicated counters at scrape
// time (the same on every node).
type scheduleCollector struct{ a *Agent }

var (
	descSchedFires   = prometheus.NewDesc("flowd_schedule_fires_total", "Fires of a schedule (scheduled and triggered), cluster-wide.", []string{"schedule"}, nil)
	descSchedStarted = prometheus.NewDesc("flowd_schedule_runs_started_total", "Runs a schedule started, cluster-wide.", []string{"schedule"}, nil)
	descSchedSkipped = prometheus.NewDesc("flowd_schedule_skipped_fires_total",
		"Fires of a schedule that started nothing: reason overlap (the overlap policy) or missed (older than the catch-up window).", []string{"schedule", "reason"}, nil)
)

func (c scheduleCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSchedFires
	ch <- descSchedStarted
	ch <- descSchedSkipped
}

func (c scheduleCollector) Collect(ch chan<- prometheus.Metric) {
	sr, err := c.a.schedules()
	if err != nil {
		return
	}
	ss, err := sr.Schedules()
	if err != nil {
		return
	}
	for _, s := range ss {
		ch <- prometheus.MustNewConstMetric(descSchedFires, prometheus.CounterValue, float64(s.Fires), s.ID)
		ch <- prometheus.MustNewConstMetric(descSchedStarted, prometheus.CounterValue, float64(s.Started), s.ID)
		ch <- prometheus.MustNewConstMetric(descSchedSkipped, prometheus.CounterValue, float64(s.Skipped), s.ID, "overlap")
		ch <- prometheus.MustNewConstMetric(descSchedSkipped, prometheus.CounterValue, float64(s.Missed), s.ID, "missed")
	}
}
