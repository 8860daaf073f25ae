package rpc

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestQueueSetParamsConcurrencyAuto(t *testing.T) {
	h := Func(func(_ context.Context, p QueueSetParams) (QueueSetParams, error) { return p, nil })
	cases := []struct {
		in      string
		want    QueueSetParams
		errPart string
	}{
		{`{"name":"q","concurrency":3}`, QueueSetParams{Name: "q", Concurrency: 3}, ""},
		{`{"name":"q","concurrency":"auto","min":1,"max":8,"target_latency_ms":250}`,
			QueueSetParams{Name: "q", Auto: true, Min: 1, Max: 8, TargetLatencyMS: 250}, ""},
		{`{"name":"q"}`, QueueSetParams{Name: "q"}, ""},
		{`{"name":"q","concurrency":"fast"}`, QueueSetParams{}, `"auto"`},
		{`{"name":"q","concurrency":"auto","mn":1}`, QueueSetParams{}, "mn"},
	}
	for _, c := range cases {
		got, err := h(context.Background(), json.RawMessage(c.in))
		if c.errPart != "" {
			if err == nil || !strings.Contains(err.Error(), c.errPart) {
				t.Errorf("%s: err %v, want one naming %s", c.in, err, c.errPart)
			}
			continue
		}
		if err != nil || got.(QueueSetParams) != c.want {
			t.Errorf("%s: %+v %v, want %+v", c.in, got, err, c.want)
		}
	}
	// Forwarded params keep "auto".
	b, err := json.Marshal(QueueSetParams{Name: "q", Auto: true, Min: 2, Max: 4})
	if err != nil || !strings.Contains(string(b), `"concurrency":"auto"`) {
		t.Fatalf("marshal: %s %v", b, err)
	}
	var back QueueSetParams
	if err := json.Unmarshal(b, &back); err != nil || !back.Auto || back.Min != 2 || back.Max != 4 {
		t.Fatalf("round trip: %+v %v", back, err)
	}
}
