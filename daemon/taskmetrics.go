package daemon

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
)

// taskMetrics are the leader's histograms of how long tasks wait and run
// and how long runs take, and its count of ended attempts. They are
// observed from the events every commit publishes (fsm.SetCommitHook),
// which carry the leader-stamped times they need (Event.Since, At), so
// nothing is read from the store and Apply only copies fields. Only the
// leader observes, so summing a metric over the nodes counts each task once
// (a new leader starts counting when it takes office).
//
// Label values come from user-chosen names; the children are cached per
// (queue, type) and per workflow, and past maxLabelSets distinct ones the
// rest share the value "_other", so a stream of unique names cannot grow
// the scrape without bound.
type taskMetrics struct {
	leader   func() bool
	wait     *prometheus.HistogramVec
	run      *prometheus.HistogramVec
	runs     *prometheus.HistogramVec
	attempts *prometheus.CounterVec
	late     *prometheus.CounterVec // schedule_to_start alerts
	// decisions counts the version-2 workflow transitions (skips, loop
	// gathers, wakes, child runs, retries, finally starts) by name: a
	// fixed label set.
	decisions *prometheus.CounterVec
	decided   map[string]prometheus.Counter // its children, made up front

	mu    sync.Mutex // the hook runs on the apply goroutine; tests read too
	tasks map[taskLabels]*taskChildren
	wfs   map[runLabels]prometheus.Observer
}

// maxLabelSets bounds the cached (queue, type) pairs and (workflow, state)
// pairs each.
const maxLabelSets = 500

const otherLabel = "_other"

type taskLabels struct{ queue, typ string }

type runLabels struct{ workflow, state string }

type taskChildren struct {
	wait, run prometheus.Observer
	late      prometheus.Counter
	attempts  map[string]prometheus.Counter // by outcome
}

var (
	// Seconds, from a millisecond clock: 1 ms to an hour.
	taskBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	// Runs: 10 ms to a day.
	runBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600}
)

func newTaskMetrics(leader func() bool) *taskMetrics {
	m := newTaskMetricsVecs(leader)
	m.decided = make(map[string]prometheus.Counter, len(decisionTransitions))
	for tr := range decisionTransitions {
		m.decided[tr] = m.decisions.WithLabelValues(tr)
	}
	return m
}

func newTaskMetricsVecs(leader func() bool) *taskMetrics {
	labels := []string{"queue", "type"}
	return &taskMetrics{
		leader: leader,
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "flowd_task_queue_wait_seconds",
			Help:    "Time from a task becoming ready (or ready again for a retry) to its claim by a worker, observed by the leader.",
			Buckets: taskBuckets}, labels),
		run: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "flowd_task_run_seconds",
			Help:    "Time from a task's claim to the worker's completion, failure or the attempt's timeout, observed by the leader.",
			Buckets: taskBuckets}, labels),
		runs: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "flowd_run_duration_seconds",
			Help:    "Time from a run's start (its creation if it never started) to its end, by workflow name and final state, observed by the leader.",
			Buckets: runBuckets}, []string{"workflow", "state"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flowd_task_attempts_total",
			Help: "Ended task attempts by outcome (succeeded, failed, timed_out, lease_expired, lease_unacked, cancelled, revoked), counted by the leader."},
			[]string{"queue", "type", "outcome"}),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flowd_task_schedule_to_start_exceeded_total",
			Help: "Tasks with schedule_to_start_policy alert that stayed ready past their schedule_to_start_ms without a claim (once per task), counted by the leader."},
			labels),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flowd_workflow_transitions_total",
			Help: "Transitions of the workflow features of state-machine version 2 by name (skip, condition_failed, wake, gather, gather_failed, child_started, child_succeeded, child_failed, reset, retry, finally), counted by the leader."},
			[]string{"transition"}),
		tasks: map[taskLabels]*taskChildren{},
		wfs:   map[runLabels]prometheus.Observer{},
	}
}

// decisionTransitions are the transitions flowd_workflow_transitions_total
// counts.
var decisionTransitions = map[string]bool{
	domain.EdgeSkip: true, domain.EdgeConditionFailed: true, domain.EdgeWake: true, domain.EdgeGather: true,
	domain.EdgeGatherFailed: true, "child_started": true, domain.EdgeChildSucceeded: true, domain.EdgeChildFailed: true,
	domain.EdgeReset: true, domain.EdgeRetry: true, "finally": true,
}

func (m *taskMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.wait, m.run, m.runs, m.attempts, m.late, m.decisions}
}

// observe is the commit hook: it looks at a commit's events on the leader.
func (m *taskMetrics) observe(evs []fsm.Event) {
	if !m.leader() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range evs {
		ev := &evs[i]
		if c := m.decided[ev.Transition]; c != nil && (ev.Kind == "task" || ev.Kind == "run") {
			c.Inc()
		}
		switch {
		case ev.Kind == "task" && ev.Transition == domain.EdgeClaim:
			if ev.Since > 0 && ev.At >= ev.Since {
				m.task(ev.Queue, ev.Type).wait.Observe(seconds(ev.At - ev.Since))
			}
		case ev.Kind == "task" && ev.Transition == domain.EventScheduleToStartExceeded:
			m.task(ev.Queue, ev.Type).late.Inc()
		case ev.Kind == "task" && ev.Outcome != "":
			c := m.task(ev.Queue, ev.Type)
			c.attempt(m, ev.Queue, ev.Type, ev.Outcome).Inc()
			switch ev.Outcome {
			case fsm.OutcomeSucceeded, fsm.OutcomeFailed, fsm.OutcomeTimedOut: // the worker's own run ended
				if ev.Since > 0 && ev.At >= ev.Since {
					c.run.Observe(seconds(ev.At - ev.Since))
				}
			}
		case ev.Kind == "run" && ev.Since > 0 && ev.At >= ev.Since:
			m.workflow(ev.Workflow, ev.To).Observe(seconds(ev.At - ev.Since))
		}
	}
}

func seconds(ms int64) float64 { return float64(ms) / 1000 }

// task returns the cached children of (queue, typ).
func (m *taskMetrics) task(queue, typ string) *taskChildren {
	k := taskLabels{queue, typ}
	if c := m.tasks[k]; c != nil {
		return c
	}
	if len(m.tasks) >= maxLabelSets {
		k = taskLabels{otherLabel, otherLabel}
		if c := m.tasks[k]; c != nil {
			return c
		}
	}
	c := &taskChildren{wait: m.wait.WithLabelValues(k.queue, k.typ), run: m.run.WithLabelValues(k.queue, k.typ),
		late: m.late.WithLabelValues(k.queue, k.typ), attempts: map[string]prometheus.Counter{}}
	m.tasks[k] = c
	return c
}

// attempt returns the counter of outcome among c's (the outcomes are the
// FSM's few constants).
func (c *taskChildren) attempt(m *taskMetrics, queue, typ, outcome string) prometheus.Counter {
	if ctr := c.attempts[outcome]; ctr != nil {
		return ctr
	}
	if c != m.tasks[taskLabels{queue, typ}] {
		queue, typ = otherLabel, otherLabel
	}
	ctr := m.attempts.WithLabelValues(queue, typ, outcome)
	c.attempts[outcome] = ctr
	return ctr
}

// workflow returns the cached run-duration child of (workflow, state).
func (m *taskMetrics) workflow(wf, state string) prometheus.Observer {
	k := runLabels{wf, state}
	if o := m.wfs[k]; o != nil {
		return o
	}
	if len(m.wfs) >= maxLabelSets {
		k.workflow = otherLabel
		if o := m.wfs[k]; o != nil {
			return o
		}
	}
	o := m.runs.WithLabelValues(k.workflow, k.state)
	m.wfs[k] = o
	return o
}
