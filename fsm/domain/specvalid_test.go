package domain

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestSpecValidAgreesWithTheReport: the quick check never passes a spec
// the full report finds a problem in, over random specs whose every field
// is drawn from valid and invalid values (and it does pass common valid
// ones: a queue job, a chain, a revert workflow).
func TestSpecValidAgreesWithTheReport(t *testing.T) {
	lim := DefaultLimits
	lim.MaxTasks = 6
	lim.MaxInputBytes = 24
	passed := 0
	// Ten runs of rapid's default 100 checks: a rare bad field still comes
	// up in a plain `go test`.
	for range 10 {
		rapid.Check(t, func(t *rapid.T) {
			// Each field is mostly valid, sometimes not (one bad field in ~32).
			num := func(label string) int64 {
				return pick(t, label, []int64{0, 0, 1000, 60000}, []int64{-1, 1, 50, 99, lim.MaxLeaseMS + 1, MinTimeoutMS - 1, MaxTimeoutMS, MaxTimeoutMS + 1})
			}
			s := Spec{
				Name:       pickOften(t, "name", []string{"", "q"}, []string{"bad name"}),
				OnFailure:  pickOften(t, "on_failure", []string{"", OnFailureFail, OnFailureRevert}, []string{"retry"}),
				DeadlineMS: num("deadline"),
			}
			n := pickOften(t, "tasks", []int{1, 2, 3, 4}, []int{0, 7})
			for i := range n {
				ts := TaskSpec{
					Key: pick(t, "key", []string{"k" + strconv.Itoa(i)}, []string{"k0", "k0", "k0", "", "bad key", strings.Repeat("k", lim.MaxKeyLen+1)}), Type: pick(t, "type", []string{"t", "u"}, []string{"", TypeWait, "bad type"}),
					Queue: pick(t, "queue", []string{"", "q"}, []string{"bad queue"}), RevertType: pick(t, "revert", []string{"", "undo"}, []string{"bad revert"}),
					LeaseMS: num("lease"), TimeoutMS: num("timeout"), ScheduleToStartMS: num("s2s"),
					ScheduleToStartPolicy: pick(t, "policy", []string{"", "", ScheduleToStartFail, ScheduleToStartAlert}, []string{"never"}),
					Signal:                pick(t, "signal", []string{""}, []string{"go", "bad signal"}),
				}
				if in := pick(t, "input", []string{"", `{"x":1}`, `[1,2]`}, []string{"null", `{"x":`, `[1,2,3,4,5,6,7,8,9,10,11,12]`}); in != "" {
					ts.Input = json.RawMessage(in)
				}
				if rapid.IntRange(0, 3).Draw(t, "random deps") == 0 {
					// Any task's key (a later one: valid, but a cycle is
					// possible), or now and then no task's.
					for range rapid.IntRange(1, 3).Draw(t, "deps") {
						ts.Deps = append(ts.Deps, pick(t, "dep", []string{"k" + strconv.Itoa(rapid.IntRange(0, n).Draw(t, "dep index"))}, []string{"a", "bad key"}))
					}
				}
				if i > 0 && rapid.Bool().Draw(t, "dep on previous") {
					ts.Deps = append(ts.Deps, s.Tasks[i-1].Key)
				}
				if rapid.Bool().Draw(t, "retry") {
					ts.Retry = &RetryPolicy{
						MaxAttempts:      pick(t, "attempts", []int{0, 3}, []int{-1, lim.MaxAttempts + 1}),
						InitialBackoffMS: pick(t, "initial", []int64{0, 10}, []int64{-1, lim.MaxBackoffMS + 1}),
						MaxBackoffMS:     pick(t, "max", []int64{0, 100}, []int64{5, -1, lim.MaxBackoffMS + 1}),
						Multiplier:       pick(t, "multiplier", []float64{0, 1, 2}, []float64{0.5, 11}),
					}
				}
				s.Tasks = append(s.Tasks, ts)
			}
			if specValid(s, lim) {
				passed++
				if ps := reportSpec(s, lim); len(ps) > 0 {
					t.Fatalf("specValid passed a spec with problems %v: %+v", ps, s)
				}
			}
		})
	}
	for _, raw := range []string{
		`{"name":"q","tasks":[{"key":"job","type":"noop","input":{"seq":1}}]}`,
		`{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a"]},{"key":"c","type":"t","deps":["a","b"],"retry":{"max_attempts":3,"initial_backoff_ms":10,"max_backoff_ms":100,"multiplier":2}}]}`,
		`{"name":"saga","on_failure":"revert","deadline_ms":60000,"tasks":[{"key":"a","type":"t","revert_type":"undo","lease_ms":1000,"timeout_ms":5000},{"key":"w","type":"` + TypeWait + `","signal":"go","timeout_ms":5000,"deps":["a"]}]}`,
	} {
		var s Spec
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			t.Fatal(err)
		}
		if !specValid(s, DefaultLimits) {
			t.Errorf("specValid rejects the valid spec %s (it would be validated the slow way)", raw)
		}
	}
	if passed < 20 {
		t.Error("fewer than 20 of 1000 random specs passed specValid: the property checked nothing")
	}
}

// pick draws one of valid, or (about one time in 32) one of invalid.
func pick[T any](t *rapid.T, label string, valid, invalid []T) T {
	if rapid.IntRange(0, 31).Draw(t, label+" bad") == 31 {
		return rapid.SampledFrom(invalid).Draw(t, label)
	}
	return rapid.SampledFrom(valid).Draw(t, label)
}

// pickOften is pick for the spec's own fields: one of invalid one time in
// four.
func pickOften[T any](t *rapid.T, label string, valid, invalid []T) T {
	if rapid.IntRange(0, 3).Draw(t, label+" bad") == 3 {
		return rapid.SampledFrom(invalid).Draw(t, label)
	}
	return rapid.SampledFrom(valid).Draw(t, label)
}
