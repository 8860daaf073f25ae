package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	gometrics "github.com/armon/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// statsReader is what /metrics, cluster.stats and the upgrade code read of
// the replicated state.
type statsReader interface {
	CountRuns() (map[domain.RunState]int, error)
	Queues() ([]fsm.QueueInfo, error)
	Counters() (fsm.Counters, error)
	Digest() (string, uint64, error)
	// ActiveVersion is the cluster's state-machine version as applied here.
	ActiveVersion() fsm.Version
}

// metrics are the agent's Prometheus metrics: flowd's own (requests, tasks,
// runs, queues, raft state) on a private registry, plus raft's internal
// go-metrics through a sink of our own (raftmetrics.go).
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	claimed   prometheus.Counter
	completed prometheus.Counter
	failed    prometheus.Counter
	tasks     *taskMetrics  // queue wait, run time, run duration, attempts (taskmetrics.go)
	slow      *slowCalls    // late -32004 answers, logged (slowcalls.go)
	orphans   *orphanLeases // leases no worker acknowledged, logged (slowcalls.go)
}

var (
	raftSinkOnce sync.Once
	raftMetrics  *raftSink // raft's go-metrics, one sink per process (raftmetrics.go)
)

func newMetrics(a *Agent) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), slow: newSlowCalls(a.log)}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flowd_rpc_requests_total",
		Help: "JSON-RPC requests by method and result code (0 = success)."}, []string{"method", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "flowd_rpc_duration_seconds",
		Help: "JSON-RPC request latency.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"method"})
	m.claimed = prometheus.NewCounter(prometheus.CounterOpts{Name: "flowd_tasks_claimed_total", Help: "Tasks handed to workers by this agent."})
	m.completed = prometheus.NewCounter(prometheus.CounterOpts{Name: "flowd_tasks_completed_total", Help: "Completions accepted through this agent."})
	m.failed = prometheus.NewCounter(prometheus.CounterOpts{Name: "flowd_tasks_failed_total", Help: "Failures accepted through this agent."})
	// Go and process metrics come from the default registry, gathered
	// together with this one (registering them twice fails the scrape).
	m.reg.MustRegister(m.requests, m.latency, m.claimed, m.completed, m.failed, stateCollector{a}, scheduleCollector{a}, rateLimitCollector{a})
	// Scheduled snapshots (snapshot_schedule.go).
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "flowd_snapshot_last_success_timestamp_seconds",
			Help: "Unix time of this agent's last successful scheduled snapshot (0: none since start)."},
			func() float64 { return float64(a.snapSched.lastOK.Load()) / 1000 }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "flowd_scheduled_snapshots_total",
			Help: "Scheduled snapshots this agent wrote."}, func() float64 { return float64(a.snapSched.ok.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "flowd_scheduled_snapshot_failures_total",
			Help: "Scheduled snapshots that failed on this agent (logged)."}, func() float64 { return float64(a.snapSched.fail.Load()) }))
	// flowd_queue_concurrency_limit (autoconc.go)
	m.reg.MustRegister(concurrencyCollector{a})
	m.reg.MustRegister(versionCollector{a})                              // flowd_fsm_version (upgrade.go)
	leading := func() bool { return a.prop != nil && a.prop.IsLeader() } // no proposer: a test's bare agent
	m.tasks = newTaskMetrics(leading)
	m.orphans = newOrphanLeases(a.log, leading)
	m.reg.MustRegister(m.tasks.collectors()...)
	raftSinkOnce.Do(func() {
		raftMetrics = newRaftSink()
		cfg := gometrics.DefaultConfig("flowd")
		cfg.EnableHostname = false
		// The Go collector of the default registry already exports the
		// runtime's numbers; go-metrics' own sampler would wake the agent
		// every second to stop the world for ReadMemStats.
		cfg.EnableRuntimeMetrics = false
		cfg.EnableServiceLabel = false
		_, _ = gometrics.NewGlobal(cfg, raftMetrics)
	})
	return m
}

// instrument wraps every handler with request counting and timing, and
// logs a -32004 answered only after a long wait (slowCalls). A method's
// success counter and latency histogram are looked up in their vectors
// once, at its first call (a lookup hashes the labels under a lock, and a
// series appears only once it has a call, as before); only an error's
// counter is looked up per call.
func (m *metrics) instrument(methods map[string]rpc.Handler) map[string]rpc.Handler {
	out := make(map[string]rpc.Handler, len(methods))
	for name, h := range methods {
		var okCount lazyMetric[prometheus.Counter]
		var lat lazyMetric[prometheus.Observer]
		out[name] = func(ctx context.Context, raw json.RawMessage) (any, error) {
			t0 := time.Now()
			res, err := h(ctx, raw)
			code := 0
			if err != nil {
				var re *rpc.Error
				if errors.As(err, &re) {
					code = re.Code
				} else {
					code = rpc.ToError(err).Code
				}
			}
			took := time.Since(t0)
			if code == 0 {
				okCount.get(func() prometheus.Counter { return m.requests.WithLabelValues(name, "0") }).Inc()
			} else {
				m.requests.WithLabelValues(name, strconv.Itoa(code)).Inc()
			}
			lat.get(func() prometheus.Observer { return m.latency.WithLabelValues(name) }).Observe(took.Seconds())
			if code == rpc.CodeUnavailable {
				m.slow.unavailable(name, took, err)
			}
			return res, err
		}
	}
	return out
}

// lazyMetric is a series of a metric vector, looked up at its first use.
type lazyMetric[T any] struct{ p atomic.Pointer[T] }

func (l *lazyMetric[T]) get(lookup func() T) T {
	if p := l.p.Load(); p != nil {
		return *p
	}
	v := lookup() // racing first calls find the same series
	l.p.Store(&v)
	return v
}

// stateCollector reads raft and FSM state at scrape time.
type stateCollector struct{ a *Agent }

var (
	descRaftState   = prometheus.NewDesc("flowd_cluster_state", "1 for this node's raft state.", []string{"state"}, nil)
	descTerm        = prometheus.NewDesc("flowd_cluster_term", "Current raft term.", nil, nil)
	descCommit      = prometheus.NewDesc("flowd_cluster_commit_index", "Raft commit index.", nil, nil)
	descApplied     = prometheus.NewDesc("flowd_cluster_applied_index", "Index applied to the state machine.", nil, nil)
	descLeaderChg   = prometheus.NewDesc("flowd_leadership_gained_total", "Times this node became leader.", nil, nil)
	descPeers       = prometheus.NewDesc("flowd_cluster_peers", "Servers in the raft configuration.", nil, nil)
	descRuns        = prometheus.NewDesc("flowd_runs", "Runs by state.", []string{"state"}, nil)
	descQueueReady  = prometheus.NewDesc("flowd_queue_ready", "Dispatchable tasks per queue.", []string{"queue"}, nil)
	descQueueRun    = prometheus.NewDesc("flowd_queue_running", "Running tasks per queue.", []string{"queue"}, nil)
	descTasksDone   = prometheus.NewDesc("flowd_tasks_done_total", "Tasks succeeded, cluster-wide (replicated counter).", nil, nil)
	descLeaseExpiry = prometheus.NewDesc("flowd_lease_expiries_total", "Leases expired and reaped, cluster-wide.", nil, nil)
	descWaiting     = prometheus.NewDesc("flowd_claims_waiting", "Long-polling claims held by this node.", nil, nil)

	// The group commit (cluster/raftnode/batcher.go), while this node leads.
	descGroupEntries  = prometheus.NewDesc("flowd_group_commit_entries_total", "Group-commit raft entries this node proposed.", nil, nil)
	descGroupCommands = prometheus.NewDesc("flowd_group_commit_commands_total", "Client commands in those entries (their ratio is the group size).", nil, nil)
	descGroupLingers  = prometheus.NewDesc("flowd_group_commit_lingers_total",
		"Waits for a fuller group after a busy one, by how they ended: filled (the queue reached the last group's size) or bound (the time limit).", []string{"outcome"}, nil)
	descGroupLinger  = prometheus.NewDesc("flowd_group_commit_linger_seconds_total", "Time spent in those waits.", nil, nil)
	descGroupPropose = prometheus.NewDesc("flowd_group_commit_propose_seconds_total",
		"Time from proposing each group entry to its results (raft commit on a majority, then the FSM apply here).", nil, nil)
)

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRaftState, descTerm, descCommit, descApplied, descLeaderChg, descPeers,
		descRuns, descQueueReady, descQueueRun, descTasksDone, descLeaseExpiry, descWaiting,
		descGroupEntries, descGroupCommands, descGroupLingers, descGroupLinger, descGroupPropose} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.a.node
	s := n.Status()
	for _, st := range []string{"Leader", "Follower", "Candidate", "Shutdown"} {
		v := 0.0
		if s.State == st {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descRaftState, prometheus.GaugeValue, v, st)
	}
	ch <- prometheus.MustNewConstMetric(descTerm, prometheus.GaugeValue, float64(s.Term))
	ch <- prometheus.MustNewConstMetric(descCommit, prometheus.GaugeValue, float64(s.CommitIndex))
	ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(s.AppliedIndex))
	ch <- prometheus.MustNewConstMetric(descLeaderChg, prometheus.CounterValue, float64(n.LeaderChanges()))
	ch <- prometheus.MustNewConstMetric(descPeers, prometheus.GaugeValue, float64(len(s.Peers)))
	ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(n.WaitingClaims()))
	g := n.GroupCommit()
	ch <- prometheus.MustNewConstMetric(descGroupEntries, prometheus.CounterValue, float64(g.Entries))
	ch <- prometheus.MustNewConstMetric(descGroupCommands, prometheus.CounterValue, float64(g.Commands))
	ch <- prometheus.MustNewConstMetric(descGroupLingers, prometheus.CounterValue, float64(g.LingersFilled), "filled")
	ch <- prometheus.MustNewConstMetric(descGroupLingers, prometheus.CounterValue, float64(g.Lingers-g.LingersFilled), "bound")
	ch <- prometheus.MustNewConstMetric(descGroupLinger, prometheus.CounterValue, g.Linger.Seconds())
	ch <- prometheus.MustNewConstMetric(descGroupPropose, prometheus.CounterValue, g.Propose.Seconds())
	if counts, err := c.a.state.CountRuns(); err == nil {
		for st, v := range countsOf(counts) {
			ch <- prometheus.MustNewConstMetric(descRuns, prometheus.GaugeValue, float64(v), st)
		}
	}
	if qs, err := c.a.state.Queues(); err == nil {
		for _, q := range qs {
			ch <- prometheus.MustNewConstMetric(descQueueReady, prometheus.GaugeValue, float64(q.Ready), q.Name)
			ch <- prometheus.MustNewConstMetric(descQueueRun, prometheus.GaugeValue, float64(q.Running), q.Name)
		}
	}
	if ctr, err := c.a.state.Counters(); err == nil {
		ch <- prometheus.MustNewConstMetric(descTasksDone, prometheus.CounterValue, float64(ctr.TasksDone))
		ch <- prometheus.MustNewConstMetric(descLeaseExpiry, prometheus.CounterValue, float64(ctr.LeaseExpiries))
	}
}

func (a *Agent) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if reason := a.notReady(); reason != "" {
			http.Error(w, "not ready: "+reason, http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	// Profiles, for operators chasing a slow node: only with --pprof (they
	// expose memory contents and cost CPU to whoever reaches --http-addr).
	if a.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(a.gatherers(), promhttp.HandlerOpts{}))
	return mux
}

// gatherers are what /metrics serves: the agent's metrics, raft's, and
// the default registry's Go and process collectors.
func (a *Agent) gatherers() prometheus.Gatherers {
	return prometheus.Gatherers{a.metrics.reg, raftMetrics.reg, prometheus.DefaultGatherer}
}

// notReady explains why this node should not take traffic, or "".
func (a *Agent) notReady() string {
	if reason := a.unhealthy(); reason != "" {
		return reason
	}
	id, _ := a.node.Leader()
	if id == "" {
		return "no leader (election in progress or no quorum)"
	}
	s := a.node.Status()
	if s.CommitIndex > s.AppliedIndex+1000 {
		return "catching up: applied " + strconv.FormatUint(s.AppliedIndex, 10) + " of " + strconv.FormatUint(s.CommitIndex, 10)
	}
	return ""
}
