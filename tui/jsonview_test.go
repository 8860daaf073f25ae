package tui

import (
	"encoding/json"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
)

func newTestJSON(w, h int) *jsonView {
	v := newJSONView(Common{Styles: NewStyles(true), Keys: NewKeyMap(false)})
	v.SetSize(w, h)
	return v
}

func viewLines(v *jsonView) []string {
	var out []string
	for _, l := range strings.Split(ansi.Strip(v.View()), "\n") {
		if l = strings.TrimRight(l, " "); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func TestJSONViewKeepsOrderAndFolds(t *testing.T) {
	v := newTestJSON(60, 20)
	v.SetFields([]jsonField{
		{Name: "input", Raw: json.RawMessage(`{"z":1,"a":"x","list":[true,null,2.5],"empty":{}}`)},
		{Name: "error", Text: "boom"},
		{Name: "skipped"}, // empty: left out
	})
	want := []string{
		`› - "input": {`,
		`      "z": 1`,
		`      "a": "x"`,
		`    - "list": [`,
		`        true`,
		`        null`,
		`        2.5`,
		`      ]`,
		`      "empty": {}`,
		`    }`,
		`    "error": "boom"`,
	}
	if got := viewLines(v); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Fold "list" (line 4), then collapse and expand everything.
	v.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("j")})
	v.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("j")})
	v.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("j")})
	v.Update(tea.KeyMsg{Type: tea.KeySpace, Runes: []rune(" ")})
	got := viewLines(v)
	if got[3] != `›   + "list": […] 3 items` || len(got) != 7 {
		t.Fatalf("after folding list:\n%s", strings.Join(got, "\n"))
	}
	v.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("C")})
	if got := viewLines(v); len(got) != 2 || !strings.Contains(got[0], `"input": {…} 4 keys`) {
		t.Fatalf("collapse all:\n%s", strings.Join(got, "\n"))
	}
	v.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("E")})
	if got := viewLines(v); len(got) != len(want) {
		t.Fatalf("expand all: %d lines", len(got))
	}
}

func TestJSONViewKeepsFoldsAcrossRefresh(t *testing.T) {
	v := newTestJSON(60, 20)
	doc := []jsonField{{Name: "result", Raw: json.RawMessage(`{"rows":[1,2,3]}`)}}
	v.SetFields(doc)
	v.Update(tea.KeyMsg{Type: tea.KeySpace, Runes: []rune(" ")}) // fold "result"
	v.SetFields(doc)                                             // a live refresh
	if got := viewLines(v); len(got) != 1 {
		t.Fatalf("fold lost on refresh:\n%s", strings.Join(got, "\n"))
	}
}

func TestJSONViewBigArraysStartFolded(t *testing.T) {
	v := newTestJSON(60, 10)
	v.SetFields([]jsonField{{Name: "r", Raw: json.RawMessage("[" + strings.Repeat("1,", 80) + "1]")}})
	if got := viewLines(v); len(got) != 1 || !strings.Contains(got[0], "81 items") {
		t.Fatalf("got %q", got)
	}
}

func TestJSONViewCutsLongValues(t *testing.T) {
	v := newTestJSON(30, 5)
	v.SetFields([]jsonField{{Name: "s", Raw: json.RawMessage(`"` + strings.Repeat("x", 100) + `"`)}})
	for _, l := range strings.Split(v.View(), "\n") {
		if w := ansi.StringWidth(l); w != 30 {
			t.Fatalf("line width %d: %q", w, l)
		}
	}
}

func TestJSONViewInvalidIsEmpty(t *testing.T) {
	v := newTestJSON(30, 3)
	v.SetFields([]jsonField{{Name: "x", Raw: json.RawMessage(`{broken`)}})
	if !strings.Contains(v.View(), "nothing to show") {
		t.Fatal(v.View())
	}
}
