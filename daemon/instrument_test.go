package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/flowd/flowd/rpc"
)

// The request counter counts successes and each error code in its own
// series, and the latency histogram every call, with the success series
// looked up once (lazyMetric).
func TestInstrumentCountsByMethodAndCode(t *testing.T) {
	a := newAgent(Config{NodeID: "n1"}, slog.New(slog.DiscardHandler))
	a.metrics = newMetrics(a)
	fail := false
	h := a.metrics.instrument(map[string]rpc.Handler{
		"run.get": func(context.Context, json.RawMessage) (any, error) {
			if fail {
				return nil, rpc.Errorf(rpc.CodeInvalidParams, "bad")
			}
			return "ok", nil
		},
		"run.list": func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("boom") },
	})
	for range 3 {
		_, _ = h["run.get"](context.Background(), nil)
	}
	fail = true
	_, _ = h["run.get"](context.Background(), nil)
	_, _ = h["run.list"](context.Background(), nil)
	for _, c := range []struct {
		method, code string
		want         float64
	}{{"run.get", "0", 3}, {"run.get", "-32602", 1}, {"run.list", "-32603", 1}} {
		var m dto.Metric
		if err := a.metrics.requests.WithLabelValues(c.method, c.code).(prometheus.Metric).Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetCounter().GetValue(); got != c.want {
			t.Errorf("flowd_rpc_requests_total{method=%q,code=%q} = %v, want %v", c.method, c.code, got, c.want)
		}
	}
	if n := seriesOf(a.metrics.latency); n != 2 {
		t.Errorf("flowd_rpc_duration_seconds has %d series, want 2 (one per method called)", n)
	}
	if n := seriesOf(a.metrics.requests); n != 3 {
		t.Errorf("flowd_rpc_requests_total has %d series, want 3", n)
	}
}

func seriesOf(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 16)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

// BenchmarkInstrument is the wrapper's own cost on a successful call.
func BenchmarkInstrument(b *testing.B) {
	a := newAgent(Config{NodeID: "n1"}, slog.New(slog.DiscardHandler))
	a.metrics = newMetrics(a)
	h := a.metrics.instrument(map[string]rpc.Handler{
		rpc.MethodTaskComplete: func(context.Context, json.RawMessage) (any, error) { return nil, nil },
	})[rpc.MethodTaskComplete]
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = h(ctx, nil)
	}
}
