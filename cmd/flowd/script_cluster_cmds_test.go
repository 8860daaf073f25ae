package main

import (
	"slices"
	"testing"
)

// The json script command's paths and comparisons: a check that passes
// must be able to fail.
func TestJSONValues(t *testing.T) {
	doc := `{"runs":[{"id":"a","labels":{"team":"data","flowd.schedule":"h"}},{"id":"b","n":2}],"next":"","ok":true}`
	for path, want := range map[string][]string{
		"runs.len()":                    {"2"},
		"runs.0.id":                     {"a"},
		"runs.*.id":                     {"a", "b"},
		"runs.id=b.n":                   {"2"},
		`runs.0.labels.flowd\.schedule`: {"h"},
		"runs.*.labels.team":            {"data"},
		"runs.5.id":                     nil,
		"ok":                            {"true"},
		"next":                          {""},
		"runs.0.labels.len()":           {"2"},
		"runs.1":                        {`{"id":"b","n":2}`},
	} {
		got, err := jsonValues(doc, path)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("jsonValues(%s) = %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := jsonValues("not json", "."); err == nil {
		t.Error("jsonValues of text that is not JSON: no error")
	}
	for _, c := range []struct {
		got, op, want string
		ok            bool
	}{
		{"a", "==", "a", true}, {"a", "==", "b", false}, {"a", "!=", "b", true}, {"a", "!=", "a", false},
		{"3", ">=", "3", true}, {"2", ">=", "3", false}, {"3", ">", "3", false}, {"1", "<", "2", true},
		{"/x/state.snap", "~", `/state\.snap$`, true}, {"", "~", ".", false},
	} {
		if ok, err := compare(c.got, c.op, c.want); err != nil || ok != c.ok {
			t.Errorf("%q %s %q = %v, %v; want %v", c.got, c.op, c.want, ok, err, c.ok)
		}
	}
	if _, err := compare("x", ">", "1"); err == nil {
		t.Error("> of a value that is no number: no error")
	}
}
