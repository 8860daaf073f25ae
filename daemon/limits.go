package daemon

import (
	"math"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// Limits on what a client may ask of an agent, checked before anything is
// proposed or waited on (docs/operations.md, "Security").

// DefaultMaxSubscriptions caps the event streams of one connection.
const DefaultMaxSubscriptions = 32

// Label bounds: run.submit rejects labels outside them with -32602 (the
// domain's, which run.list's selector parser applies too).
const (
	MaxLabelKeyBytes   = domain.MaxLabelKeyBytes
	MaxLabelValueBytes = domain.MaxLabelValueBytes
)

// clampMS turns a client's millisecond count into a duration no longer than
// limit, clamping before the multiplication so that a value near the int64
// maximum cannot overflow into a negative (instant) wait. Negative values
// are the caller's to reject; they give 0 here.
func clampMS(ms int64, limit time.Duration) time.Duration {
	if ms <= 0 {
		return 0
	}
	if ms > limit.Milliseconds() || ms > math.MaxInt64/int64(time.Millisecond) {
		return limit
	}
	return time.Duration(ms) * time.Millisecond
}

// checkLabels validates run labels: keys 1..128 bytes, values up to 1 KiB,
// both valid UTF-8 without NUL or other control characters.
func checkLabels(labels map[string]string) error {
	for k, v := range labels {
		if k == "" || len(k) > MaxLabelKeyBytes {
			return invalid("label key %q must be 1 to %d bytes", truncate(k, 40), MaxLabelKeyBytes)
		}
		if len(v) > MaxLabelValueBytes {
			return invalid("label %q: value of %d bytes exceeds the limit of %d", truncate(k, 40), len(v), MaxLabelValueBytes)
		}
		if !domain.CleanText(k) {
			return invalid("label key %q must be UTF-8 without NUL or control characters", truncate(k, 40))
		}
		if !domain.CleanText(v) {
			return invalid("label %q: the value must be UTF-8 without NUL or control characters", truncate(k, 40))
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
