package daemon

import (
	"strings"
	"sync"
	"unicode"

	gometrics "github.com/armon/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// Raft's own metrics. hashicorp/raft and raft-boltdb report through the
// process-wide go-metrics API (timings in milliseconds, counters, gauges,
// dotted camelCase keys such as raft.replication.appendEntries.rpc).
// go-metrics' Prometheus sink exported them as they came: camelCase names,
// summaries with NaN quantiles once a window emptied, help text equal to
// the name, and a summary observation (quantile streams under a lock) on
// every commit. raftSink maps them to Prometheus' conventions instead:
//
//   - names: flowd_ + the key in snake_case, joined by '_'
//     (raft.commitTime -> flowd_raft_commit_time_seconds);
//   - timings: histograms in seconds (_seconds), cheap to observe; the
//     few samples that are sizes, counts or ratios get their own unit;
//   - counters: _total; gauges as they are;
//   - help text naming the go-metrics key it comes from;
//   - go-metrics runtime keys are dropped (the Go collector exports them).
//
// It is one sink per process (go-metrics is global) on its own registry,
// gathered by every agent's /metrics. A key seen again with other label
// names cannot be the same Prometheus metric and is dropped (counted in
// flowd_raft_metrics_dropped_total).
type raftSink struct {
	reg     *prometheus.Registry
	dropped prometheus.Counter

	mu   sync.Mutex
	vecs map[string]raftVec // by metric name
	// seen maps what a call reports (its kind, key and label names, as
	// cacheKey writes them) to its metric, so a repeated report (every
	// commit reports several) builds no names.
	seen map[string]seenVec
}

type seenVec struct {
	v  raftVec
	ok bool
}

type raftVec struct {
	labels    []string
	counter   *prometheus.CounterVec
	gauge     *prometheus.GaugeVec
	histogram *prometheus.HistogramVec
}

// raftBuckets span 50 µs to ~1.6 s (commit, fsync and RPC timings).
var raftBuckets = prometheus.ExponentialBuckets(0.00005, 2, 16)

func newRaftSink() *raftSink {
	s := &raftSink{reg: prometheus.NewRegistry(), vecs: map[string]raftVec{}, seen: map[string]seenVec{}}
	s.dropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "flowd_raft_metrics_dropped_total",
		Help: "Raft metric samples dropped: a go-metrics key reported with label names that differ from its first report."})
	s.reg.MustRegister(s.dropped)
	return s
}

// promName turns a go-metrics key into a Prometheus name, or "" for keys
// that are not exported.
func promName(key []string, suffix string) string {
	if len(key) == 0 || key[0] == "runtime" || (len(key) > 1 && key[0] == "flowd" && key[1] == "runtime") || perPeerKey(key) {
		return ""
	}
	var b strings.Builder
	b.WriteString("flowd")
	for i, part := range key {
		if i == 0 && part == "flowd" {
			continue // the go-metrics service name
		}
		b.WriteByte('_')
		snake(&b, part)
	}
	b.WriteString(suffix)
	return b.String()
}

// snake writes s in snake_case: appendEntries -> append_entries,
// dispatchLog -> dispatch_log, RPC -> rpc; other characters than letters
// and digits become '_'.
func snake(b *strings.Builder, s string) {
	prevLower := false
	for _, r := range s {
		switch {
		case unicode.IsUpper(r):
			if prevLower {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			prevLower = false
		case unicode.IsLower(r) || unicode.IsDigit(r):
			b.WriteRune(r)
			prevLower = true
		default:
			b.WriteByte('_')
			prevLower = false
		}
	}
}

func labelNames(labels []gometrics.Label) []string {
	out := make([]string, len(labels))
	for i, l := range labels {
		if n, ok := labelRenames[l.Name]; ok {
			out[i] = n
			continue
		}
		var b strings.Builder
		snake(&b, l.Name)
		out[i] = b.String()
	}
	return out
}

// labelRenames: raft's peer_id label is exported as peer.
var labelRenames = map[string]string{"peer_id": "peer"}

// perPeerKeys are the keys raft also reports with the peer's id appended
// (raft.replication.appendEntries.rpc.n2, its "legacy telemetry"), which
// would make one metric name per node id; the same samples come labelled
// (peer="n2") under the key without it, which is what is exported.
var perPeerKeys = [][]string{
	{"raft", "replication", "appendEntries", "rpc"},
	{"raft", "replication", "appendEntries", "logs"},
	{"raft", "replication", "heartbeat"},
	{"raft", "replication", "installSnapshot"},
}

// perPeerKey reports a key of perPeerKeys with a peer id appended.
func perPeerKey(key []string) bool {
	if len(key) > 0 && key[0] == "flowd" {
		key = key[1:]
	}
	for _, p := range perPeerKeys {
		if len(key) == len(p)+1 && sameNames(key[:len(p)], p) {
			return true
		}
	}
	return false
}

func labelValues(labels []gometrics.Label) []string {
	out := make([]string, len(labels))
	for i, l := range labels {
		out[i] = l.Value
	}
	return out
}

func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// vec returns the metric named name with these label names, made and
// registered on first use by mk; ok is false if name exists with other
// label names.
func (s *raftSink) vec(name string, labels []string, mk func() raftVec) (raftVec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, seen := s.vecs[name]
	if !seen {
		v = mk()
		v.labels = labels
		var c prometheus.Collector
		switch {
		case v.counter != nil:
			c = v.counter
		case v.gauge != nil:
			c = v.gauge
		default:
			c = v.histogram
		}
		if err := s.reg.Register(c); err != nil {
			v = raftVec{labels: []string{"\x00"}} // never matches: dropped from now on
		}
		s.vecs[name] = v
	}
	return v, sameNames(v.labels, labels)
}

// cacheKey writes kind, key and label names into buf (no allocation for
// the usual short keys).
func cacheKey(buf []byte, kind byte, key []string, labels []gometrics.Label) []byte {
	buf = append(buf, kind)
	for _, k := range key {
		buf = append(append(buf, k...), '.')
	}
	for _, l := range labels {
		buf = append(append(buf, '|'), l.Name...)
	}
	return buf
}

// lookup returns the metric a report goes to (ok false: dropped), making
// it on the first report of its kind, key and label names with mk.
func (s *raftSink) lookup(kind byte, key []string, labels []gometrics.Label, mk func() (raftVec, bool)) (raftVec, bool) {
	var arr [128]byte
	ck := cacheKey(arr[:0], kind, key, labels)
	s.mu.Lock()
	e, hit := s.seen[string(ck)]
	s.mu.Unlock()
	if hit {
		return e.v, e.ok
	}
	v, ok := mk()
	s.mu.Lock()
	s.seen[string(ck)] = seenVec{v, ok}
	s.mu.Unlock()
	return v, ok
}

func help(kind string, key []string) string {
	return "hashicorp/raft " + kind + " " + strings.Join(key, ".") + " (go-metrics)."
}

func (s *raftSink) SetGauge(key []string, val float32) { s.SetGaugeWithLabels(key, val, nil) }

func (s *raftSink) SetGaugeWithLabels(key []string, val float32, labels []gometrics.Label) {
	if len(key) == 0 {
		return
	}
	v, ok := s.lookup('g', key, labels, func() (raftVec, bool) {
		name := promName(key, gaugeUnits[key[len(key)-1]].suffix)
		if name == "" {
			return raftVec{}, false
		}
		names := labelNames(labels)
		v, ok := s.vec(name, names, func() raftVec {
			return raftVec{gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help("gauge", key)}, names)}
		})
		return v, ok && v.gauge != nil
	})
	if !ok {
		s.drop(key)
		return
	}
	scale := 1.0
	if u, ok := gaugeUnits[key[len(key)-1]]; ok {
		scale = u.scale
	}
	v.gauge.WithLabelValues(labelValues(labels)...).Set(float64(val) * scale)
}

// drop counts a dropped report (runtime keys are left out silently).
func (s *raftSink) drop(key []string) {
	if promName(key, "") != "" {
		s.dropped.Inc()
	}
}

// EmitKey is go-metrics' key/value event; nothing in raft's metrics uses
// it, and Prometheus has no such type.
func (s *raftSink) EmitKey([]string, float32) {}

func (s *raftSink) IncrCounter(key []string, val float32) { s.IncrCounterWithLabels(key, val, nil) }

func (s *raftSink) IncrCounterWithLabels(key []string, val float32, labels []gometrics.Label) {
	if val < 0 {
		return
	}
	v, ok := s.lookup('c', key, labels, func() (raftVec, bool) {
		name := promName(key, "_total")
		if name == "" {
			return raftVec{}, false
		}
		names := labelNames(labels)
		v, ok := s.vec(name, names, func() raftVec {
			return raftVec{counter: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help("counter", key)}, names)}
		})
		return v, ok && v.counter != nil
	})
	if !ok {
		s.drop(key)
		return
	}
	v.counter.WithLabelValues(labelValues(labels)...).Add(float64(val))
}

func (s *raftSink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

// AddSampleWithLabels records a sample: a timing in milliseconds (what
// MeasureSince reports, observed here in seconds) unless sampleUnits lists
// the key as a size, a count or a ratio.
func (s *raftSink) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	if len(key) == 0 {
		return
	}
	u := sampleUnits[key[len(key)-1]]
	if u.suffix == "" && u.buckets == nil {
		u = sampleUnit{suffix: "_seconds", scale: 0.001, buckets: raftBuckets}
	}
	v, ok := s.lookup('h', key, labels, func() (raftVec, bool) {
		name := promName(key, u.suffix)
		if name == "" {
			return raftVec{}, false
		}
		names := labelNames(labels)
		v, ok := s.vec(name, names, func() raftVec {
			return raftVec{histogram: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name,
				Help: help("sample", key), Buckets: u.buckets}, names)}
		})
		return v, ok && v.histogram != nil
	})
	if !ok {
		s.drop(key)
		return
	}
	v.histogram.WithLabelValues(labelValues(labels)...).Observe(float64(val) * u.scale)
}

type sampleUnit struct {
	suffix  string
	scale   float64
	buckets []float64
}

// sampleUnits are the samples of raft and raft-boltdb that are not
// timings, by the last element of their key.
var sampleUnits = map[string]sampleUnit{
	"logSize":       {"_bytes", 1, prometheus.ExponentialBuckets(64, 4, 10)},
	"logBatchSize":  {"_bytes", 1, prometheus.ExponentialBuckets(64, 4, 10)},
	"logsPerBatch":  {"_logs", 1, prometheus.ExponentialBuckets(1, 2, 11)},
	"applyBatchNum": {"_entries", 1, prometheus.ExponentialBuckets(1, 2, 11)},
	"writeCapacity": {"_logs_per_second", 1, prometheus.ExponentialBuckets(10, 4, 10)},
	"saturation":    {"_ratio", 1, prometheus.LinearBuckets(0.1, 0.1, 10)},
}

// gaugeUnits are raft's gauges that carry a unit, by the last element of
// their key: ages and durations in milliseconds, exported in seconds.
var gaugeUnits = map[string]sampleUnit{
	"oldestLogAge":        {suffix: "_seconds", scale: 0.001},
	"lastRestoreDuration": {suffix: "_seconds", scale: 0.001},
}

var _ gometrics.MetricSink = (*raftSink)(nil)
