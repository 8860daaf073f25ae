package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
)

// Adaptive concurrency: queue.set {name, concurrency: "auto", min, max,
// target_latency_ms?} and queue.list's auto.

// QueueAuto is a queue's auto concurrency in queue.list: the floor, the
// ceiling and the latency target the leader steers the cap by.
type QueueAuto struct {
	Min             int   `json:"min"`
	Max             int   `json:"max"`
	TargetLatencyMS int64 `json:"target_latency_ms"`
}

// QueueSetAuto sets queue name's concurrency to auto between min and max,
// aiming at targetMS of completion latency (0: 1000).
func (c *Client) QueueSetAuto(ctx context.Context, name string, min, max int, targetMS int64) (*ChangedResult, error) {
	return call[ChangedResult](ctx, c.CallIdempotent, MethodQueueSet,
		QueueSetParams{Name: name, Auto: true, Min: min, Max: max, TargetLatencyMS: targetMS})
}

type queueSetPlain QueueSetParams

type queueSetWire struct {
	queueSetPlain
	Concurrency any `json:"concurrency,omitempty"`
}

// MarshalJSON writes concurrency as "auto" when Auto is set.
func (p QueueSetParams) MarshalJSON() ([]byte, error) {
	w := queueSetWire{queueSetPlain: queueSetPlain(p)}
	switch {
	case p.Auto:
		w.Concurrency = "auto"
	case p.Concurrency != 0:
		w.Concurrency = p.Concurrency
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads concurrency as an integer or the string "auto",
// rejecting members queue.set does not have.
func (p *QueueSetParams) UnmarshalJSON(b []byte) error {
	var w struct {
		queueSetPlain
		Concurrency json.RawMessage `json:"concurrency"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	*p = QueueSetParams(w.queueSetPlain)
	raw := bytes.TrimSpace(w.Concurrency)
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case string(raw) == `"auto"`:
		p.Auto = true
	default:
		if err := json.Unmarshal(raw, &p.Concurrency); err != nil {
			return fmt.Errorf("concurrency must be an integer (0 = unlimited) or \"auto\" (with min and max), got %s", raw)
		}
	}
	return nil
}
