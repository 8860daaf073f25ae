package domain

import (
	"hash/fnv"
	"math"
	"strconv"
)

// Backoff returns how long to wait before attempt number attempt+1 of a task,
// after attempt failed (attempt counts from 1). The delay grows by
// multiplier from the initial backoff, is capped at the maximum, and carries
// "equal jitter" (half fixed, half spread) drawn from a hash of the task id
// and the attempt, so replaying the log gives the same schedule on every
// replica while concurrent retries of different tasks still spread out.
func Backoff(p RetryPolicy, taskID string, attempt int) int64 {
	if attempt < 1 {
		attempt = 1
	}
	initial := float64(max(p.InitialBackoffMS, 0))
	ceiling := float64(max(p.MaxBackoffMS, p.InitialBackoffMS))
	mult := p.Multiplier
	if mult < 1 {
		mult = DefaultMultiplier
	}
	d := initial * math.Pow(mult, float64(attempt-1))
	if d > ceiling || math.IsInf(d, 0) || math.IsNaN(d) {
		d = ceiling
	}
	base := int64(d)
	if base <= 1 {
		return base
	}
	half := base / 2
	return half + int64(jitter(taskID, attempt)%uint64(base-half+1))
}

func jitter(taskID string, attempt int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(taskID))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(attempt)))
	return h.Sum64()
}
