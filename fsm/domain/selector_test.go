package domain

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestParseSelector(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Selector
	}{
		{"", nil},
		{"  ", nil},
		{"env=prod", Selector{{SelEquals, "env", "prod"}}},
		{"env==prod", Selector{{SelEquals, "env", "prod"}}},
		{" env = prod , team != data ", Selector{{SelEquals, "env", "prod"}, {SelNotEquals, "team", "data"}}},
		{"env=", Selector{{SelEquals, "env", ""}}},
		{"team!=", Selector{{SelNotEquals, "team", ""}}},
		{"gpu,!spot", Selector{{SelExists, "gpu", ""}, {SelNotExists, "spot", ""}}},
		{"! spot", Selector{{SelNotExists, "spot", ""}}},
		{"a/b=c/7,flowd.schedule", Selector{{SelEquals, "a/b", "c/7"}, {SelExists, "flowd.schedule", ""}}},
		{"caf\u00e9=th\u00e9", Selector{{SelEquals, "caf\u00e9", "th\u00e9"}}},
	} {
		got, err := ParseSelector(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got.String() != c.want.String() || len(got) != len(c.want) {
			t.Errorf("%q: got %v, want %v", c.in, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%q term %d: got %+v, want %+v", c.in, i, got[i], c.want[i])
			}
		}
	}
}

func TestParseSelectorRejects(t *testing.T) {
	long := strings.Repeat("k", MaxLabelKeyBytes+1)
	for _, c := range []struct{ in, says string }{
		{"env=prod,", `term 2 "": empty term`},
		{",env=prod", `term 1 "": empty term`},
		{"a,,b", `term 2 "": empty term`},
		{"=prod", `term 1 "=prod": empty key`},
		{"!=prod", `term 1 "!=prod": empty key`},
		{"!", `term 1 "!": empty key`},
		{"!k=v", `term 1 "!k=v": the key holds`},
		{"a=b=c", `term 1 "a=b=c": the value holds`},
		{"a!=!b", `the value holds`},
		{long + "=v", "key of 129 bytes exceeds the label key limit of 128"},
		{"k=" + strings.Repeat("v", MaxLabelValueBytes+1), "value of 1025 bytes exceeds the label value limit of 1024"},
		{"k=\x00", "UTF-8 without NUL"},
		{"k\x01", "UTF-8 without NUL"},
		{"k=\xff", "UTF-8 without NUL"},
		{strings.Repeat("a,", MaxSelectorTerms) + "a", "65 terms, more than the limit of 64"},
	} {
		_, err := ParseSelector(c.in)
		if err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%.40q: %v, want ErrInvalidArgument saying %q", c.in, err, c.says)
		}
	}
	if _, err := ParseSelector(strings.Repeat("a,", MaxSelectorTerms-1) + "a"); err != nil {
		t.Errorf("64 terms: %v", err)
	}
}

// A parsed selector written back parses to itself, and Matches is every
// term's Holds, each kind by its definition.
func TestSelectorProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		word := rapid.StringMatching(`[a-z/.]{1,4}`)
		labels := rapid.MapOf(word, rapid.StringMatching(`[a-z]{0,2}`)).Draw(t, "labels")
		var sel Selector
		for range rapid.IntRange(1, 5).Draw(t, "n") {
			term := SelectorTerm{Op: SelectorOp(rapid.IntRange(1, 4).Draw(t, "op")), Key: word.Draw(t, "key")}
			if term.Op == SelEquals || term.Op == SelNotEquals {
				term.Value = rapid.StringMatching(`[a-z]{0,2}`).Draw(t, "value")
			}
			sel = append(sel, term)
		}
		back, err := ParseSelector(sel.String())
		if err != nil || back.String() != sel.String() || len(back) != len(sel) {
			t.Fatalf("%q parsed to %v, %v", sel.String(), back, err)
		}
		all := true
		for _, term := range sel {
			v, ok := labels[term.Key]
			want := map[SelectorOp]bool{
				SelEquals: ok && v == term.Value, SelNotEquals: !(ok && v == term.Value),
				SelExists: ok, SelNotExists: !ok,
			}[term.Op]
			if term.Holds(labels) != want {
				t.Fatalf("%v on %v: %v", term, labels, !want)
			}
			all = all && want
		}
		if sel.Matches(labels) != all {
			t.Fatalf("%v on %v: Matches %v", sel, labels, !all)
		}
	})
}
