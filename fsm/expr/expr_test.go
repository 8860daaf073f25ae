package expr

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

func TestEvalSeesInputLabelsAndDeps(t *testing.T) {
	e := Env{
		Input:  json.RawMessage(`{"env":"prod","n":3,"ratio":0.5,"items":[1,2,3]}`),
		Labels: map[string]string{"team": "a"},
		Deps: map[string]Dep{
			"check":   {State: domain.TaskSucceeded, Result: json.RawMessage(`{"ok":true,"count":12}`)},
			"fetch-x": {State: domain.TaskFailed},
		},
	}
	cases := map[string]bool{
		`input.env == "prod"`:       true,
		`input.n + 1 == 4`:          true,
		`input.ratio < 1.0`:         true,
		`size(input.items) == 3`:    true,
		`input.items.all(i, i > 0)`: true,
		`labels.team == "b"`:        false,
		`deps.check.result.ok && deps.check.result.count > 10`:   true,
		`deps["fetch-x"].state == "failed"`:                      true,
		`has(input.missing)`:                                     false,
		`input.env != "prod" || deps.check.state == "succeeded"`: true,
	}
	for src, want := range cases {
		got, err := Eval(src, e)
		if err != nil || got != want {
			t.Errorf("Eval(%s) = %v, %v; want %v", src, got, err, want)
		}
	}
}

func TestEvalErrors(t *testing.T) {
	e := Env{Input: json.RawMessage(`{"a":1,"big":[` + strings.Repeat("1,", 5000) + `1]}`)}
	for _, src := range []string{
		`input.nope == 1`, // no such key
		`input.a`,         // an int, not a bool
		// Over the cost limit: 5001^2 comparisons.
		`input.big.all(x, input.big.all(y, x == y))`,
	} {
		if _, err := Eval(src, e); err == nil {
			t.Errorf("Eval(%s): no error", src)
		}
	}
}

func TestCheckRefusesAtCompile(t *testing.T) {
	for src, want := range map[string]string{
		`input.a ==`:      "Syntax error",
		`nope == 1`:       "undeclared reference to 'nope'",
		`"a" + 1 == 2`:    "no matching overload",
		`1 + 2`:           "must be a bool",
		"   ":             "empty",
		`labels.team > 1`: "no matching overload",
	} {
		err := Check(src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%q) = %v, want an error with %q", src, err, want)
		}
	}
}

// TestMapIterationIsSorted: a list built from an object's keys has one
// order on every replica.
func TestMapIterationIsSorted(t *testing.T) {
	e := Env{Input: json.RawMessage(`{"m":{"d":1,"b":2,"a":3,"c":4,"e":5,"f":6,"g":7,"h":8}}`)}
	for range 50 {
		ok, err := Eval(`input.m.map(k, k) == ["a","b","c","d","e","f","g","h"]`, e)
		if err != nil || !ok {
			t.Fatalf("keys not in order: %v %v", ok, err)
		}
	}
}

func TestValidateAddsProblemsWithPaths(t *testing.T) {
	s := domain.Spec{Tasks: []domain.TaskSpec{{Key: "a", Type: "x"}, {Key: "b", Type: "x", When: "input.("}}}
	err := Validate(s, domain.ValidateSpec(s, domain.DefaultLimits))
	var se *domain.SpecError
	if !errors.As(err, &se) || len(se.Problems) != 1 || se.Problems[0].Path != "tasks[1].when" || se.Problems[0].Code != domain.CodeBadCondition {
		t.Fatalf("Validate = %v", err)
	}
	other := errors.New("other")
	if Validate(s, other) != other {
		t.Fatal("a non-spec error must pass through")
	}
	s.Tasks[1].When = "true"
	if err := Validate(s, nil); err != nil {
		t.Fatal(err)
	}
}
