package domain

import "fmt"

// Adaptive concurrency (AIMD) of a queue: `concurrency: auto` with a floor,
// a ceiling and a latency target. The leader observes the queue's recent
// completion latency (claim to completion, from leader-stamped times) and
// its in-flight count, and proposes a new cap with NextCap; the state
// machine only stores the cap it is told (within the floor and ceiling), so
// this rule runs outside Apply and replicas cannot disagree about it.

// Bounds of an auto concurrency configuration.
const (
	MaxAutoConcurrency     = 100_000
	DefaultTargetLatencyMS = 1000
	MaxTargetLatencyMS     = 24 * 3600 * 1000
	// AutoDecreaseNum/AutoDecreaseDen is the multiplicative decrease: the
	// cap is halved (never below the floor) when latency is above target.
	AutoDecreaseNum = 1
	AutoDecreaseDen = 2
	// AutoIncrease is the additive increase per controller period.
	AutoIncrease = 1
)

// AutoConcurrency is a queue's adaptive concurrency configuration.
type AutoConcurrency struct {
	Min             int   `json:"min"`
	Max             int   `json:"max"`
	TargetLatencyMS int64 `json:"target_latency_ms"`
}

// Validate reports what is wrong with a, in words that say what to give.
func (a AutoConcurrency) Validate() error {
	switch {
	case a.Min < 1:
		return fmt.Errorf("auto concurrency needs a floor (min) of at least 1, got %d", a.Min)
	case a.Max < a.Min:
		return fmt.Errorf("auto concurrency ceiling (max) %d is below its floor (min) %d; give max >= min", a.Max, a.Min)
	case a.Max > MaxAutoConcurrency:
		return fmt.Errorf("auto concurrency ceiling (max) %d is over %d", a.Max, MaxAutoConcurrency)
	case a.TargetLatencyMS < 1 || a.TargetLatencyMS > MaxTargetLatencyMS:
		return fmt.Errorf("target latency %d ms must be 1 ms to 24 h", a.TargetLatencyMS)
	}
	return nil
}

// Clamp brings cap within [Min, Max].
func (a AutoConcurrency) Clamp(cap int) int { return min(max(cap, a.Min), a.Max) }

// AutoObservation is what the controller saw of a queue over its window.
type AutoObservation struct {
	// Samples is how many attempts ended in the window; LatencyMS is their
	// latency statistic (the controller uses the 90th percentile).
	Samples   int
	LatencyMS int64
	// Running and Ready are the queue's in-flight and waiting counts now.
	Running, Ready int
}

// NextCap is the AIMD rule: with no completion in the window the cap holds
// (no signal); above the target latency it is multiplied by
// AutoDecreaseNum/AutoDecreaseDen (at least the floor); at or under the
// target it grows by AutoIncrease (at most the ceiling), but only while the
// cap is what limits the queue (as many tasks in flight as the cap allows
// and more waiting), so a queue held back by its workers, or with no
// backlog, does not drift up to its ceiling. A cap outside [Min, Max] is
// first brought within it.
func NextCap(cur int, a AutoConcurrency, o AutoObservation) int {
	cur = a.Clamp(cur)
	if o.Samples == 0 {
		return cur
	}
	if o.LatencyMS > a.TargetLatencyMS {
		return a.Clamp(cur * AutoDecreaseNum / AutoDecreaseDen)
	}
	if o.Running >= cur && o.Ready > 0 {
		return a.Clamp(cur + AutoIncrease)
	}
	return cur
}
