package rpc

import (
	"context"
	"encoding/json"
	"testing"
)

type benchSubmit struct {
	Workflow json.RawMessage   `json:"workflow"`
	ID       string            `json:"id,omitempty"`
	Input    json.RawMessage   `json:"input,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
}

func BenchmarkFuncDecode(b *testing.B) {
	raw := json.RawMessage(`{"id":"01937a2e-7f1c-7d2a-9f00-0123456789ab","workflow":{"name":"peerqueues","tasks":[{"key":"job","type":"peerqueues_noop","input":{"seq":1,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}]}}`)
	h := Func(func(_ context.Context, p benchSubmit) (int, error) { return len(p.ID), nil })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h(context.Background(), raw); err != nil {
			b.Fatal(err)
		}
	}
}
