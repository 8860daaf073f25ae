package domain

import "fmt"

// RateLimit is a token bucket kept as its theoretical arrival time (GCRA):
// one token every Interval, at most Burst banked. Its state is one number,
// TAT, moved forward only by the leader-stamped time of the entries that take
// tokens, so every replica computes the same bucket from the same log, with
// integer arithmetic (no float, no remainder lost between refills).
//
// With burst B, a window of w seconds sees at most B-1 + ceil(w*rate)
// leases; burst 1 (the default) never more than rate in any 1 s window.
type RateLimit struct {
	// RateMilli is the rate in thousandths of a token per second (rate 20/s
	// is 20000), so a fractional rate such as 0.5/s needs no float.
	RateMilli int64 `json:"rate_milli"`
	Burst     int   `json:"burst"`
	// TAT (µs since the epoch) is when the bucket is full again; at or before
	// now it holds Burst tokens.
	TAT int64 `json:"tat_us,omitempty"`
}

// Rate-limit bounds.
const (
	MinRateMilli = 1             // 0.001 per second
	MaxRateMilli = 1_000_000_000 // 1,000,000 per second
	MaxBurst     = 1_000_000
)

// NewRateLimit validates a limit; rateMilli 0 means no limit (nil).
func NewRateLimit(rateMilli int64, burst int) (*RateLimit, error) {
	switch {
	case rateMilli == 0 && burst == 0:
		return nil, nil
	case rateMilli < MinRateMilli || rateMilli > MaxRateMilli:
		return nil, fmt.Errorf("rate must be 0.001 to 1000000 per second, or 0 to remove the limit")
	case burst < 0 || burst > MaxBurst:
		return nil, fmt.Errorf("burst must be 0 (the default, 1) to %d", MaxBurst)
	}
	return &RateLimit{RateMilli: rateMilli, Burst: max(burst, 1)}, nil
}

// IntervalUS is the time per token in µs, rounded up (a limit is never
// exceeded by rounding).
func (b *RateLimit) IntervalUS() int64 {
	return (1_000_000_000 + b.RateMilli - 1) / b.RateMilli
}

// Available is how many tokens the bucket holds at nowMS.
func (b *RateLimit) Available(nowMS int64) int {
	if b == nil {
		return MaxBurst
	}
	t, now := b.IntervalUS(), nowMS*1000
	n := (now + int64(b.Burst)*t - max(b.TAT, now)) / t
	return int(max(n, 0))
}

// Take spends n tokens at nowMS (the caller checked Available).
func (b *RateLimit) Take(nowMS int64, n int) {
	if b == nil {
		return
	}
	b.TAT = max(b.TAT, nowMS*1000) + int64(n)*b.IntervalUS()
}

// NextAt is the first ms at or after nowMS at which a token is available.
func (b *RateLimit) NextAt(nowMS int64) int64 {
	if b == nil {
		return nowMS
	}
	at := b.TAT - int64(b.Burst-1)*b.IntervalUS() // one token is left to take
	ms := (at + 999) / 1000
	if ms < nowMS {
		return nowMS
	}
	return ms
}

// Rate is the limit in tokens per second.
func (b *RateLimit) Rate() float64 { return float64(b.RateMilli) / 1000 }
