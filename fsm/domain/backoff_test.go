package domain

import (
	"fmt"
	"math"
	"testing"

	"pgregory.net/rapid"
)

// unjittered2 is the delay before jitter for multiplier 2, computed
// independently of Backoff with integer doubling.
func unjittered2(initial, ceiling int64, attempt int) int64 {
	d := initial
	for i := 1; i < attempt && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}

func TestBackoffDeterministic(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 10, InitialBackoffMS: 1000, MaxBackoffMS: 60_000, Multiplier: 2}
	for attempt := 1; attempt <= 10; attempt++ {
		for _, id := range []string{"run-1/a", "run-1/b", ""} {
			first := Backoff(p, id, attempt)
			for range 3 {
				if again := Backoff(p, id, attempt); again != first {
					t.Fatalf("Backoff(%q, %d) = %d then %d", id, attempt, first, again)
				}
			}
		}
	}
}

func TestBackoffGrowsUntilCap(t *testing.T) {
	p := RetryPolicy{InitialBackoffMS: 100, MaxBackoffMS: 100_000, Multiplier: 2}
	for _, id := range []string{"a", "b", "run/xyz", "t-42"} {
		prev := int64(0)
		for attempt := 1; attempt <= 30; attempt++ {
			base := unjittered2(100, 100_000, attempt)
			got := Backoff(p, id, attempt)
			if got < base/2 || got > base {
				t.Errorf("Backoff(%q, %d) = %d, want in [%d, %d]", id, attempt, got, base/2, base)
			}
			// With multiplier 2 the jitter windows [b/2, b] and [b, 2b] touch, so
			// the delay never shrinks while the next step is below the cap.
			if 2*unjittered2(100, 100_000, attempt-1) <= 100_000 && got < prev {
				t.Errorf("Backoff(%q, %d) = %d < previous %d", id, attempt, got, prev)
			}
			prev = got
		}
		// Far past the cap the delay sits in [cap/2, cap].
		if got := Backoff(p, id, 25); got < 50_000 || got > 100_000 {
			t.Errorf("capped Backoff(%q) = %d", id, got)
		}
	}
	// Growth is visible on average: later attempts wait much longer.
	sum := func(attempt int) (s int64) {
		for i := range 50 {
			s += Backoff(p, fmt.Sprint("task-", i), attempt)
		}
		return s
	}
	if s1, s5 := sum(1), sum(5); s5 < 8*s1 {
		t.Errorf("attempt 5 total %d not ~16x attempt 1 total %d", s5, s1)
	}
}

func TestBackoffMultiplier(t *testing.T) {
	p := RetryPolicy{InitialBackoffMS: 1000, MaxBackoffMS: 1_000_000, Multiplier: 3}
	for attempt := 1; attempt <= 6; attempt++ {
		base := int64(1000 * math.Pow(3, float64(attempt-1)))
		if got := Backoff(p, "m", attempt); got < base/2 || got > base {
			t.Errorf("x3 attempt %d = %d, want in [%d, %d]", attempt, got, base/2, base)
		}
	}
	// A multiplier below 1 (invalid, or unset) falls back to the default 2.
	for _, m := range []float64{0, 0.5, -3} {
		q := RetryPolicy{InitialBackoffMS: 1000, MaxBackoffMS: 1_000_000, Multiplier: m}
		d := RetryPolicy{InitialBackoffMS: 1000, MaxBackoffMS: 1_000_000, Multiplier: 2}
		for attempt := 1; attempt <= 6; attempt++ {
			if Backoff(q, "m", attempt) != Backoff(d, "m", attempt) {
				t.Errorf("multiplier %g attempt %d differs from the default", m, attempt)
			}
		}
	}
	// Multiplier 1 is a constant backoff (jittered).
	one := RetryPolicy{InitialBackoffMS: 800, MaxBackoffMS: 60_000, Multiplier: 1}
	for attempt := 1; attempt <= 20; attempt++ {
		if got := Backoff(one, "c", attempt); got < 400 || got > 800 {
			t.Errorf("multiplier 1 attempt %d = %d", attempt, got)
		}
	}
}

func TestBackoffJitterSpreads(t *testing.T) {
	p := RetryPolicy{InitialBackoffMS: 60_000, MaxBackoffMS: 60_000, Multiplier: 2}
	const n = 200
	seen := map[int64]bool{}
	var lo, hi int64 = math.MaxInt64, 0
	for i := range n {
		d := Backoff(p, fmt.Sprintf("run-%d/task", i), 3)
		seen[d] = true
		lo, hi = min(lo, d), max(hi, d)
	}
	// 200 draws from 30001 values: a handful of collisions at most.
	if len(seen) < n*9/10 {
		t.Errorf("only %d distinct delays for %d task ids", len(seen), n)
	}
	// They spread over most of the window [30000, 60000].
	if lo < 30_000 || hi > 60_000 || hi-lo < 20_000 {
		t.Errorf("delays span [%d, %d]", lo, hi)
	}
	// The same task's capped attempts also differ (the attempt is hashed).
	perAttempt := map[int64]bool{}
	for attempt := 10; attempt < 30; attempt++ {
		perAttempt[Backoff(p, "one-task", attempt)] = true
	}
	if len(perAttempt) < 15 {
		t.Errorf("only %d distinct delays over 20 capped attempts", len(perAttempt))
	}
}

func TestBackoffEdgeCases(t *testing.T) {
	p := RetryPolicy{InitialBackoffMS: 1000, MaxBackoffMS: 60_000, Multiplier: 2}
	// attempt < 1 counts as the first attempt.
	for _, a := range []int{0, -1, -1000, math.MinInt} {
		if got, want := Backoff(p, "t", a), Backoff(p, "t", 1); got != want {
			t.Errorf("Backoff(attempt %d) = %d, want attempt 1's %d", a, got, want)
		}
	}
	// The zero policy never waits, whatever the attempt.
	for _, a := range []int{-1, 0, 1, 2, 63, 64, 1100, math.MaxInt} {
		if got := Backoff(RetryPolicy{}, "t", a); got != 0 {
			t.Errorf("zero policy attempt %d = %d", a, got)
		}
	}
	// Tiny delays are not jittered below themselves.
	if got := Backoff(RetryPolicy{InitialBackoffMS: 1, MaxBackoffMS: 1}, "t", 5); got != 1 {
		t.Errorf("1 ms policy = %d", got)
	}
	// A cap below the initial value (max 0 = unset) means the initial value.
	for _, q := range []RetryPolicy{{InitialBackoffMS: 5000}, {InitialBackoffMS: 5000, MaxBackoffMS: 10}} {
		for _, a := range []int{1, 2, 10} {
			if got := Backoff(q, "t", a); got < 2500 || got > 5000 {
				t.Errorf("%+v attempt %d = %d", q, a, got)
			}
		}
	}
	// Huge attempts: math.Pow overflows to +Inf, which must clamp to the cap,
	// never wrap around or turn into NaN.
	day := DefaultLimits.MaxBackoffMS
	for _, q := range []RetryPolicy{
		{InitialBackoffMS: 1000, MaxBackoffMS: 60_000, Multiplier: 2},
		{InitialBackoffMS: 1, MaxBackoffMS: day, Multiplier: 10},
		{InitialBackoffMS: day, MaxBackoffMS: day, Multiplier: 10},
		{InitialBackoffMS: 1000, MaxBackoffMS: day, Multiplier: math.Inf(1)},
		{InitialBackoffMS: 1000, MaxBackoffMS: day, Multiplier: math.NaN()},
	} {
		ceiling := max(q.MaxBackoffMS, q.InitialBackoffMS)
		for _, a := range []int{1025, 1 << 20, math.MaxInt32, math.MaxInt - 1, math.MaxInt} {
			if got := Backoff(q, "t", a); got < ceiling/2 || got > ceiling {
				t.Errorf("%+v attempt %d = %d, want in [%d, %d]", q, a, got, ceiling/2, ceiling)
			}
		}
	}
}

// genPolicy draws a retry policy the validator accepts, normalized as the
// FSM stores it.
func genPolicy(t *rapid.T) RetryPolicy {
	lim := DefaultLimits
	initial := rapid.Int64Range(0, lim.MaxBackoffMS).Draw(t, "initial")
	var maxB int64
	if rapid.Bool().Draw(t, "capped") {
		maxB = rapid.Int64Range(initial, lim.MaxBackoffMS).Draw(t, "max")
	}
	mult := 0.0
	if rapid.Bool().Draw(t, "hasMult") {
		mult = rapid.Float64Range(1, 10).Draw(t, "mult")
	}
	p := &RetryPolicy{
		MaxAttempts:      rapid.IntRange(0, lim.MaxAttempts).Draw(t, "attempts"),
		InitialBackoffMS: initial, MaxBackoffMS: maxB, Multiplier: mult,
	}
	ts := TaskSpec{Key: "k", Type: "t", Retry: p}
	if err := ValidateSpec(Spec{Tasks: []TaskSpec{ts}}, lim); err != nil {
		t.Fatalf("generator made an invalid policy %+v: %v", *p, err)
	}
	return *ts.Normalize().Retry
}

func TestBackoffProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genPolicy(t)
		id := rapid.String().Draw(t, "id")
		attempt := rapid.IntRange(-5, 200).Draw(t, "attempt")
		got := Backoff(p, id, attempt)
		if got != Backoff(p, id, attempt) {
			t.Fatalf("not deterministic")
		}
		if got < 0 || got > p.MaxBackoffMS {
			t.Fatalf("Backoff(%+v, %d) = %d outside [0, %d]", p, attempt, got, p.MaxBackoffMS)
		}
		// At least half of the un-jittered delay (1 ms slack for float rounding).
		a := max(attempt, 1)
		base := math.Min(float64(p.InitialBackoffMS)*math.Pow(p.Multiplier, float64(a-1)), float64(p.MaxBackoffMS))
		if float64(got) < math.Floor(base)/2-1 || float64(got) > base+1 {
			t.Fatalf("Backoff(%+v, %d) = %d, un-jittered %.0f", p, attempt, got, base)
		}
	})
}
