package rpc

import "context"

// RateLimit is a token bucket of queue.list: at most Rate tasks per second
// are leased, Burst at once after a quiet spell; Tokens is what it holds
// now (on the answering node's clock).
type RateLimit struct {
	Rate   float64 `json:"rate"`
	Burst  int     `json:"burst"`
	Tokens int     `json:"tokens"`
}

// QueueSetRate sets (rate > 0) or removes (rate 0) the rate limit of a
// queue, or with typ of that task type's tasks in the queue.
func (c *Client) QueueSetRate(ctx context.Context, name, typ string, rate float64, burst int) (*ChangedResult, error) {
	return call[ChangedResult](ctx, c.CallIdempotent, MethodQueueSet, QueueSetParams{Name: name, Type: typ, Rate: &rate, Burst: burst})
}
