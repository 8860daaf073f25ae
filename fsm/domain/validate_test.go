package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// cp is one (code, path) pair of a SpecError.
type cp struct{ code, path string }

func pairs(t *testing.T, err error) []cp {
	t.Helper()
	if err == nil {
		return nil
	}
	if !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("error %v does not wrap ErrInvalidSpec", err)
	}
	var se *SpecError
	if !errors.As(err, &se) {
		t.Fatalf("error %T %v is not a *SpecError", err, err)
	}
	out := make([]cp, len(se.Problems))
	for i, p := range se.Problems {
		out[i] = cp{p.Code, p.Path}
		if p.Message == "" {
			t.Errorf("problem %v has no message", p)
		}
	}
	return out
}

func sorted(ps []cp) []cp {
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(a, b cp) int {
		return strings.Compare(a.code+"\x00"+a.path, b.code+"\x00"+b.path)
	})
	return ps
}

func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	var se *SpecError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a *SpecError", err)
	}
	return se.Problems
}

func smallLimits() Limits {
	lim := DefaultLimits
	lim.MaxTasks = 3
	lim.MaxInputBytes = 16
	return lim
}

func TestParseSpecProblems(t *testing.T) {
	cases := []struct {
		name string
		json string
		want []cp
	}{
		{"unknown dependency", `{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["zz"]}]}`,
			[]cp{{CodeUnknownDependency, "tasks[1].deps[0]"}}},
		{"duplicate key", `{"tasks":[{"key":"a","type":"t"},{"key":"a","type":"t"}]}`,
			[]cp{{CodeDuplicateKey, "tasks[1].key"}}},
		{"self dependency", `{"tasks":[{"key":"a","type":"t","deps":["a"]}]}`,
			[]cp{{CodeSelfDependency, "tasks[0].deps[0]"}}},
		{"duplicate dependency", `{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a","a"]}]}`,
			[]cp{{CodeDuplicateDep, "tasks[1].deps[1]"}}},
		{"empty workflow", `{"tasks":[]}`, []cp{{CodeEmptyWorkflow, "tasks"}}},
		{"no tasks field", `{"name":"w"}`, []cp{{CodeEmptyWorkflow, "tasks"}}},
		{"null tasks", `{"tasks":null}`, []cp{{CodeEmptyWorkflow, "tasks"}}},
		{"unknown top-level field", `{"tasks":[{"key":"a","type":"t"}],"taks":1}`,
			[]cp{{CodeUnknownField, "taks"}}},
		{"unknown task field", `{"tasks":[{"key":"a","type":"t","dep":["b"]}]}`,
			[]cp{{CodeUnknownField, "tasks[0].dep"}}},
		{"unknown retry field", `{"tasks":[{"key":"a","type":"t","retry":{"foo":1}}]}`,
			[]cp{{CodeUnknownField, "tasks[0].retry.foo"}}},
		{"negative max_attempts", `{"tasks":[{"key":"a","type":"t","retry":{"max_attempts":-1}}]}`,
			[]cp{{CodeBadRetryPolicy, "tasks[0].retry.max_attempts"}}},
		{"max_attempts over limit", `{"tasks":[{"key":"a","type":"t","retry":{"max_attempts":101}}]}`,
			[]cp{{CodeBadRetryPolicy, "tasks[0].retry.max_attempts"}}},
		{"max_backoff below initial", `{"tasks":[{"key":"a","type":"t","retry":{"initial_backoff_ms":5000,"max_backoff_ms":1000}}]}`,
			[]cp{{CodeBadRetryPolicy, "tasks[0].retry.max_backoff_ms"}}},
		{"negative initial backoff", `{"tasks":[{"key":"a","type":"t","retry":{"initial_backoff_ms":-1}}]}`,
			[]cp{{CodeBadRetryPolicy, "tasks[0].retry.initial_backoff_ms"}}},
		{"multiplier out of range", `{"tasks":[{"key":"a","type":"t","retry":{"multiplier":0.5}}]}`,
			[]cp{{CodeBadRetryPolicy, "tasks[0].retry.multiplier"}}},
		{"retry of wrong type", `{"tasks":[{"key":"a","type":"t","retry":5}]}`,
			[]cp{{CodeBadRetryPolicy, "tasks[0].retry"}}},
		{"retry field of wrong type", `{"tasks":[{"key":"a","type":"t","retry":{"max_attempts":"3"}}]}`,
			[]cp{{CodeBadRetryPolicy, "tasks[0].retry.max_attempts"}}},
		{"unknown on_failure", `{"on_failure":"explode","tasks":[{"key":"a","type":"t"}]}`,
			[]cp{{CodeUnknownOnFailure, "on_failure"}}},
		{"too many tasks", `{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t"},{"key":"c","type":"t"},{"key":"d","type":"t"}]}`,
			[]cp{{CodeTooManyTasks, "tasks"}}},
		{"input too large", `{"tasks":[{"key":"a","type":"t","input":{"x":"0123456789abcdef"}}]}`,
			[]cp{{CodeInputTooLarge, "tasks[0].input"}}},
		{"missing key", `{"tasks":[{"type":"t"}]}`, []cp{{CodeMissingField, "tasks[0].key"}}},
		{"missing type", `{"tasks":[{"key":"a"}]}`, []cp{{CodeMissingField, "tasks[0].type"}}},
		{"invalid key", `{"tasks":[{"key":"a b","type":"t"}]}`, []cp{{CodeInvalidName, "tasks[0].key"}}},
		{"invalid name", `{"name":"-w","tasks":[{"key":"a","type":"t"}]}`, []cp{{CodeInvalidName, "name"}}},
		{"invalid queue", `{"tasks":[{"key":"a","type":"t","queue":"q/1"}]}`, []cp{{CodeInvalidName, "tasks[0].queue"}}},
		{"lease too short", `{"tasks":[{"key":"a","type":"t","lease_ms":50}]}`, []cp{{CodeBadLease, "tasks[0].lease_ms"}}},
		{"negative lease", `{"tasks":[{"key":"a","type":"t","lease_ms":-1}]}`, []cp{{CodeBadLease, "tasks[0].lease_ms"}}},
		{"deps of wrong type", `{"tasks":[{"key":"a","type":"t","deps":"b"}]}`, []cp{{CodeBadJSON, "tasks[0].deps"}}},
		{"lease of wrong type", `{"tasks":[{"key":"a","type":"t","lease_ms":"1s"}]}`, []cp{{CodeBadJSON, "tasks[0].lease_ms"}}},
		{"name of wrong type", `{"name":7,"tasks":[{"key":"a","type":"t"}]}`, []cp{{CodeBadJSON, "name"}}},
		{"tasks of wrong type", `{"tasks":{"key":"a"}}`, []cp{{CodeBadJSON, "tasks"}, {CodeEmptyWorkflow, "tasks"}}},
		{"task not an object", `{"tasks":["a"]}`,
			[]cp{{CodeBadJSON, "tasks[0]"}, {CodeMissingField, "tasks[0].key"}, {CodeMissingField, "tasks[0].type"}}},
		{"spec not an object", `[1,2]`, []cp{{CodeBadJSON, "$"}}},
		{"null spec", `null`, []cp{{CodeBadJSON, "$"}}},
		{"not JSON", `{"tasks":`, []cp{{CodeBadJSON, "$"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSpec([]byte(c.json), smallLimits())
			if err == nil {
				t.Fatalf("ParseSpec accepted %s", c.json)
			}
			if got := pairs(t, err); !slices.Equal(sorted(got), sorted(c.want)) {
				t.Errorf("problems = %v, want %v\n%v", got, c.want, err)
			}
		})
	}
}

func TestParseSpecCycle(t *testing.T) {
	raw := `{"tasks":[
		{"key":"x","type":"t"},
		{"key":"c","type":"t","deps":["a"]},
		{"key":"b","type":"t","deps":["c","x"]},
		{"key":"a","type":"t","deps":["b"]}]}`
	_, err := ParseSpec([]byte(raw), DefaultLimits)
	ps := problemsOf(t, err)
	if len(ps) != 1 || ps[0].Code != CodeCycle || ps[0].Path != "tasks[3].deps" {
		t.Fatalf("problems = %v", ps)
	}
	if !strings.Contains(ps[0].Message, "a -> b -> c -> a") {
		t.Errorf("cycle message %q does not name a -> b -> c -> a", ps[0].Message)
	}

	// Two separate cycles are both reported, in key order, deterministically.
	raw2 := `{"tasks":[
		{"key":"q","type":"t","deps":["p"]},{"key":"p","type":"t","deps":["q"]},
		{"key":"b","type":"t","deps":["a"]},{"key":"a","type":"t","deps":["b"]}]}`
	var first string
	for i := range 5 {
		_, err := ParseSpec([]byte(raw2), DefaultLimits)
		ps := problemsOf(t, err)
		want := []cp{{CodeCycle, "tasks[3].deps"}, {CodeCycle, "tasks[1].deps"}}
		if got := pairs(t, err); !slices.Equal(got, want) {
			t.Fatalf("problems = %v, want %v", got, want)
		}
		if !strings.Contains(ps[0].Message, "a -> b -> a") || !strings.Contains(ps[1].Message, "p -> q -> p") {
			t.Errorf("messages %q, %q", ps[0].Message, ps[1].Message)
		}
		if i == 0 {
			first = err.Error()
		} else if err.Error() != first {
			t.Errorf("unstable error text:\n%s\n%s", first, err.Error())
		}
	}
}

func TestParseSpecReportsEveryProblem(t *testing.T) {
	raw := `{
		"name": "wf",
		"on_failure": "shrug",
		"colour": "blue",
		"tasks": [
			{"key":"a","type":"t","deps":["b"],"retry":{"max_attempts":-2,"initial_backoff_ms":500,"max_backoff_ms":100,"jitter":true}},
			{"key":"b","type":"t","deps":["a","ghost"]},
			{"key":"b","type":"t","extra":1},
			{"key":"d","deps":["d"],"input":{"big":"0123456789abcdef"}}
		]}`
	_, err := ParseSpec([]byte(raw), smallLimits())
	want := []cp{
		{CodeUnknownField, "colour"},
		{CodeUnknownField, "tasks[0].retry.jitter"},
		{CodeUnknownField, "tasks[2].extra"},
		{CodeUnknownOnFailure, "on_failure"},
		{CodeTooManyTasks, "tasks"},
		{CodeBadRetryPolicy, "tasks[0].retry.max_attempts"},
		{CodeBadRetryPolicy, "tasks[0].retry.max_backoff_ms"},
		{CodeDuplicateKey, "tasks[2].key"},
		{CodeMissingField, "tasks[3].type"},
		{CodeInputTooLarge, "tasks[3].input"},
		{CodeUnknownDependency, "tasks[1].deps[1]"},
		{CodeSelfDependency, "tasks[3].deps[0]"},
		{CodeCycle, "tasks[0].deps"},
	}
	if got := pairs(t, err); !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("problems:\n got %v\nwant %v", sorted(got), sorted(want))
	}
	// The message says how many problems there are and lists each.
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("%d problem(s)", len(want))) || !strings.Contains(msg, "a -> b -> a") {
		t.Errorf("error text %q", msg)
	}
	// Problems marshal with stable field names (clients match on them).
	b, _ := json.Marshal(problemsOf(t, err)[0])
	if !strings.Contains(string(b), `"code":`) || !strings.Contains(string(b), `"path":`) || !strings.Contains(string(b), `"message":`) {
		t.Errorf("problem JSON %s", b)
	}
}

func TestParseSpecValidAndNormalize(t *testing.T) {
	raw := `{"name":"etl","tasks":[
		{"key":"extract","type":"http.get","input":{ "url" : "x" }},
		{"key":"load","type":"sql","deps":["extract"],"queue":"db","lease_ms":5000,"priority":3,
		 "retry":{"max_attempts":5,"initial_backoff_ms":200},"revert_type":"sql.undo"}]}`
	spec, err := ParseSpec([]byte(raw), DefaultLimits)
	if err != nil {
		t.Fatalf("ParseSpec: %v", err)
	}
	if spec.Name != "etl" || len(spec.Tasks) != 2 || spec.Tasks[1].Priority != 3 || spec.Tasks[1].RevertType != "sql.undo" {
		t.Fatalf("decoded %+v", spec)
	}
	if string(spec.Tasks[0].Input) != `{"url":"x"}` {
		t.Errorf("input not compacted: %s", spec.Tasks[0].Input)
	}
	if spec.OnFailure != "" || spec.Tasks[0].Queue != "" || spec.Tasks[0].Retry != nil {
		t.Errorf("ParseSpec filled defaults itself: %+v", spec)
	}

	n := spec.Normalize()
	n2 := spec.NormalizeWith(10) // a cluster whose default_max_attempts is 10
	a, b := n.Tasks[0], n.Tasks[1]
	if n.OnFailure != OnFailureFail || a.Queue != "default" || a.LeaseMS != 30000 || a.Retry == nil ||
		a.Retry.MaxAttempts != DefaultMaxAttempts || DefaultMaxAttempts != 1 || n2.Tasks[0].Retry.MaxAttempts != 10 || a.Retry.InitialBackoffMS != DefaultInitialBackoffMS ||
		a.Retry.MaxBackoffMS != DefaultMaxBackoffMS || a.Retry.Multiplier != DefaultMultiplier || a.Deps != nil {
		t.Errorf("defaults not filled: %+v retry %+v", a, a.Retry)
	}
	if b.Queue != "db" || b.LeaseMS != 5000 || b.Retry.MaxAttempts != 5 || b.Retry.InitialBackoffMS != 200 ||
		b.Retry.MaxBackoffMS != DefaultMaxBackoffMS || !slices.Equal(b.Deps, []string{"extract"}) {
		t.Errorf("explicit values changed: %+v retry %+v", b, b.Retry)
	}
	// Normalize copies: the parsed spec is untouched, and normalizing twice is
	// the same as once; the normalized spec still validates.
	if spec.Tasks[0].Retry != nil || spec.Tasks[0].Queue != "" || spec.OnFailure != "" {
		t.Errorf("Normalize modified its receiver: %+v", spec)
	}
	if spec.Tasks[1].Retry.MaxBackoffMS != 0 || n.Tasks[1].Retry == spec.Tasks[1].Retry {
		t.Errorf("Normalize shares or modifies the retry policy")
	}
	nn := n.Normalize()
	j1, _ := json.Marshal(n)
	j2, _ := json.Marshal(nn)
	if string(j1) != string(j2) {
		t.Errorf("Normalize not idempotent:\n%s\n%s", j1, j2)
	}
	if err := ValidateSpec(n, DefaultLimits); err != nil {
		t.Errorf("normalized spec invalid: %v", err)
	}
	// A large initial backoff raises the default cap with it.
	big := TaskSpec{Retry: &RetryPolicy{InitialBackoffMS: 120_000}}.Normalize()
	if big.Retry.MaxBackoffMS != 120_000 {
		t.Errorf("max_backoff default below initial: %+v", big.Retry)
	}
	// null input and null retry count as absent; on_failure revert is accepted.
	spec, err = ParseSpec([]byte(`{"on_failure":"revert","tasks":[{"key":"a","type":"t","input":null,"retry":null,"deps":[]}]}`), DefaultLimits)
	if err != nil || spec.Tasks[0].Input != nil || spec.Tasks[0].Retry != nil || spec.OnFailure != OnFailureRevert {
		t.Errorf("null fields: %+v, %v", spec, err)
	}
}

// An explicit max_backoff_ms below the default initial backoff must survive
// Normalize: the frozen spec must still validate, and Backoff must honour it.
func TestNormalizeKeepsExplicitMaxBackoff(t *testing.T) {
	spec, err := ParseSpec([]byte(`{"tasks":[{"key":"a","type":"t","retry":{"max_attempts":5,"max_backoff_ms":100}}]}`), DefaultLimits)
	if err != nil {
		t.Fatalf("ParseSpec: %v", err)
	}
	n := spec.Normalize()
	r := *n.Tasks[0].Retry
	if r.MaxBackoffMS != 100 || r.InitialBackoffMS > r.MaxBackoffMS || r.InitialBackoffMS <= 0 {
		t.Errorf("normalized retry %+v", r)
	}
	if err := ValidateSpec(n, DefaultLimits); err != nil {
		t.Errorf("normalized spec invalid: %v", err)
	}
	for attempt := 1; attempt <= 5; attempt++ {
		if d := Backoff(r, "a", attempt); d > 100 {
			t.Errorf("Backoff(attempt %d) = %d, above max_backoff_ms 100", attempt, d)
		}
	}
}

func TestValidateSpecDirect(t *testing.T) {
	if err := ValidateSpec(Spec{Tasks: []TaskSpec{{Key: "a", Type: "t"}}}, DefaultLimits); err != nil {
		t.Errorf("valid spec: %v", err)
	}
	err := ValidateSpec(Spec{Tasks: []TaskSpec{{Key: "a", Type: "t", Input: json.RawMessage(`{bad`)}}}, DefaultLimits)
	if got := pairs(t, err); !slices.Equal(got, []cp{{CodeBadJSON, "tasks[0].input"}}) {
		t.Errorf("bad input JSON: %v", got)
	}
	long := strings.Repeat("k", DefaultLimits.MaxKeyLen+1)
	err = ValidateSpec(Spec{Tasks: []TaskSpec{{Key: long, Type: "t"}}}, DefaultLimits)
	if got := pairs(t, err); !slices.Equal(got, []cp{{CodeInvalidName, "tasks[0].key"}}) {
		t.Errorf("long key: %v", got)
	}
}

func TestValidKey(t *testing.T) {
	for _, k := range []string{"a", "A1", "0", "a_b.c:d-e", "http.get"} {
		if !ValidKey(k) {
			t.Errorf("ValidKey(%q) = false", k)
		}
	}
	for _, k := range []string{"", "_a", "-a", ".a", "a b", "a/b", "ä", "a\n"} {
		if ValidKey(k) {
			t.Errorf("ValidKey(%q) = true", k)
		}
	}
}

func TestValidateSpawn(t *testing.T) {
	existing := map[string]bool{"root": true, "other": true}
	ok := []TaskSpec{
		{Key: "c1", Type: "t", Deps: []string{"root"}},
		{Key: "c2", Type: "t", Deps: []string{"c1", "other"}},
	}
	if err := ValidateSpawn(ok, existing, DefaultLimits); err != nil {
		t.Errorf("valid spawn: %v", err)
	}
	bad := []TaskSpec{
		{Key: "root", Type: "t"},                       // collides with the run
		{Key: "c1", Type: "t", Deps: []string{"nope"}}, // unknown
		{Key: "c2", Type: "t", Deps: []string{"c3"}},   // cycle c2 -> c3 -> c2
		{Key: "c3", Type: "t", Deps: []string{"c2"}},   //
		{Key: "c1", Type: "t"},                         // duplicate sibling
		{Key: "c4", Type: "t", Deps: []string{"c4"}},   // self
		{Key: "c5", Type: "", Deps: []string{"other"}}, // missing type
	}
	err := ValidateSpawn(bad, existing, DefaultLimits)
	want := []cp{
		{CodeDuplicateKey, "spawn[0].key"},
		{CodeUnknownDependency, "spawn[1].deps[0]"},
		{CodeCycle, "spawn[2].deps"},
		{CodeDuplicateKey, "spawn[4].key"},
		{CodeSelfDependency, "spawn[5].deps[0]"},
		{CodeMissingField, "spawn[6].type"},
	}
	if got := pairs(t, err); !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("problems:\n got %v\nwant %v", sorted(got), sorted(want))
	}
	if msg := err.Error(); !strings.Contains(msg, "c2 -> c3 -> c2") {
		t.Errorf("cycle not named: %s", msg)
	}
	if err := ValidateSpawn(nil, existing, DefaultLimits); err != nil {
		t.Errorf("empty spawn: %v", err)
	}
}

func TestParseTaskSpecs(t *testing.T) {
	raw := []json.RawMessage{
		json.RawMessage(`{"key":"a","type":"t","input":[1, 2]}`),
		json.RawMessage(`{"key":"b","type":"t","bogus":1,"retry":{"nope":0}}`),
		json.RawMessage(`7`),
	}
	tasks, err := ParseTaskSpecs(raw, "spawn")
	want := []cp{{CodeUnknownField, "spawn[1].bogus"}, {CodeUnknownField, "spawn[1].retry.nope"}, {CodeBadJSON, "spawn[2]"}}
	if got := pairs(t, err); !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("problems %v, want %v", got, want)
	}
	if len(tasks) != 3 || tasks[0].Key != "a" || string(tasks[0].Input) != `[1,2]` || tasks[1].Retry == nil {
		t.Errorf("decoded %+v", tasks)
	}
}

func FuzzParseSpec(f *testing.F) {
	seeds := []string{
		`{"tasks":[{"key":"a","type":"t"}]}`,
		`{"name":"w","on_failure":"revert","tasks":[{"key":"a","type":"t","input":{"x":1},"retry":{"max_attempts":3,"initial_backoff_ms":10,"max_backoff_ms":100,"multiplier":1.5}},{"key":"b","type":"t","deps":["a"],"queue":"q","lease_ms":1000,"priority":-1,"revert_type":"u"}]}`,
		`{"tasks":[{"key":"a","type":"t","deps":["c"]},{"key":"b","type":"t","deps":["a"]},{"key":"c","type":"t","deps":["b","a","zz"]}]}`,
		`{"tasks":[{"key":"a","type":"t","deps":["a","a"]},{"key":"a","deps":["b"]},{"key":"b","type":"t","deps":["a"]}]}`,
		`{"tasks":[{"key":"a","type":"t","retry":{"max_attempts":-1,"foo":1}}],"bar":2}`,
		`{"tasks":[null,1,"x",[],{}]}`,
		`{"tasks":[{"key":"a","type":"t","retry":{"max_backoff_ms":100}}]}`,
		`{"tasks":{}}`, `[]`, `null`, `{`, ``, `"x"`, `{"tasks":[{"key":"a","type":"t","retry":[]}]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	lim := smallLimits()
	lim.MaxTasks = 8
	f.Fuzz(func(t *testing.T, raw []byte) {
		spec, err := ParseSpec(raw, lim)
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) || !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("error %T %v is not a *SpecError", err, err)
			}
			if len(se.Problems) == 0 {
				t.Fatalf("SpecError with no problems")
			}
			for _, p := range se.Problems {
				// Only an unknown top-level field named "" has an empty path.
				if p.Code == "" || p.Message == "" || (p.Path == "" && p.Code != CodeUnknownField) {
					t.Fatalf("incomplete problem %+v", p)
				}
			}
			return
		}
		// Accepted specs are non-empty, revalidate, and still validate after
		// defaults are filled in and after a JSON round trip.
		if len(spec.Tasks) == 0 {
			t.Fatalf("accepted an empty workflow")
		}
		if err := ValidateSpec(spec, lim); err != nil {
			t.Fatalf("accepted spec fails ValidateSpec: %v", err)
		}
		if err := ValidateSpec(spec.Normalize(), lim); err != nil {
			t.Fatalf("normalized spec invalid: %v", err)
		}
		b, err := json.Marshal(spec)
		if err != nil {
			t.Fatalf("marshal accepted spec: %v", err)
		}
		again, err := ParseSpec(b, lim)
		if err != nil {
			t.Fatalf("round trip of %s: %v", b, err)
		}
		if len(again.Tasks) != len(spec.Tasks) {
			t.Fatalf("round trip changed the task count")
		}
		for i := range spec.Tasks {
			if again.Tasks[i].Key != spec.Tasks[i].Key || !slices.Equal(again.Tasks[i].Deps, spec.Tasks[i].Deps) {
				t.Fatalf("round trip changed task %d: %+v vs %+v", i, spec.Tasks[i], again.Tasks[i])
			}
		}
	})
}
