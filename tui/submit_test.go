package tui

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// e opens the input editor on the run's input, pretty-printed over
// several lines; it is edited across lines (enter is a new line) and
// ctrl+s goes on to the confirm dialog with the input compacted.
func TestEditReplayInEditor(t *testing.T) {
	tm, f := startSized(t, 160, 45, nil)
	keys(tm, "e") // on run 12, whose input is known
	waitFor(t, tm, "Replay run "+shortID(runID(12))+" with new input", `"source": "s3://bucket/day=2025-06-01",`, `"b"`)
	// The cursor is at the end: take back `,` + `"b"` + `]` + `}` (and
	// their line breaks and indents), then type new lines.
	for range len(",\n    \"b\"\n  ]\n}") {
		tm.Send(tea.KeyMsg{Type: tea.KeyBackspace})
	}
	tm.Type(",")
	keys(tm, "enter")
	tm.Type(`    "c"`)
	keys(tm, "enter")
	tm.Type("  ]")
	keys(tm, "enter")
	tm.Type("}")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlS})
	waitFor(t, tm, "Replay run "+shortID(runID(12))+" with new input?", `"tags":["a","c"]}`)
	keys(tm, "y")
	waitFor(t, tm, "replay of "+shortID(runID(12)))
	finish(t, tm)
	want := []string{"replay " + runID(12) + ` input={"source":"s3://bucket/day=2025-06-01","rows":1200,"dry_run":false,"tags":["a","c"]}`}
	if got := f.called(); !slices.Equal(got, want) {
		t.Fatalf("calls = %v\nwant    %v", got, want)
	}
}

// Invalid JSON keeps the editor open and says so; esc closes it, calling
// nothing.
func TestEditReplayRefusesInvalidJSON(t *testing.T) {
	tm, f := startSized(t, 80, 24, nil)
	keys(tm, "e")
	waitFor(t, tm, "with new input", `"rows": 1200`)
	tm.Type(" oops")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlS})
	waitFor(t, tm, "not valid JSON")
	keys(tm, "esc")
	v := finish(t, tm)
	if strings.Contains(v, "with new input") || len(f.called()) != 0 {
		t.Fatalf("calls = %v\n%s", f.called(), v)
	}
}

func TestEditReplayEditor80x24(t *testing.T)  { testEditReplayEditor(t, 80, 24) }
func TestEditReplayEditor160x45(t *testing.T) { testEditReplayEditor(t, 160, 45) }

func testEditReplayEditor(t *testing.T, w, h int) {
	tm, _ := startSized(t, w, h, nil)
	keys(tm, "e")
	waitFor(t, tm, "with new input", `"dry_run": false,`)
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
}

func TestEditReplayDialog80x24(t *testing.T)  { testEditReplayDialog(t, 80, 24) }
func TestEditReplayDialog160x45(t *testing.T) { testEditReplayDialog(t, 160, 45) }

func testEditReplayDialog(t *testing.T, w, h int) {
	tm, f := startSized(t, w, h, nil)
	keys(tm, ":")
	tm.Type(`replay ` + shortID(runID(12)) + ` {"rows":5}`)
	keys(tm, "enter")
	waitFor(t, tm, "with new input?")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	if len(f.called()) != 0 {
		t.Fatalf("the dialog alone called %v", f.called())
	}
}

func TestSubmitWorkflowFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hello.yaml")
	wf := "name: hello\ntasks:\n  - key: greet\n    type: echo\n  - key: shout\n    type: echo\n    deps: [greet]\n"
	if err := os.WriteFile(path, []byte(wf), 0o600); err != nil {
		t.Fatal(err)
	}
	tm, f := startSized(t, 80, 24, nil)
	keys(tm, ":")
	tm.Type("submit " + path + ` {"who":"ops"}`)
	keys(tm, "enter")
	waitFor(t, tm, "Submit workflow hello?", "2 tasks", `input {"who":"ops"}`)
	keys(tm, "y")
	waitFor(t, tm, "hello  ○ pending") // the new run is opened
	finish(t, tm)
	if got := f.called(); len(got) != 1 || got[0] != `submit hello input={"who":"ops"} id=true` {
		t.Fatalf("calls = %v", got)
	}
}

func TestSubmitErrors(t *testing.T) {
	tm, f := start(t)
	keys(tm, ":")
	tm.Type("submit /nonexistent/wf.yaml")
	keys(tm, "enter")
	waitFor(t, tm, ":submit: open /nonexistent/wf.yaml")
	keys(tm, ":")
	tm.Type("replay " + shortID(runID(12)) + " {bad")
	keys(tm, "enter")
	waitFor(t, tm, ":replay: the input is not valid JSON")
	v := finish(t, tm)
	if len(f.called()) != 0 || strings.Contains(v, "Submit workflow") {
		t.Fatalf("calls = %v", f.called())
	}
}

func TestSubmitDialog80x24(t *testing.T)  { testSubmitDialog(t, 80, 24) }
func TestSubmitDialog160x45(t *testing.T) { testSubmitDialog(t, 160, 45) }

func testSubmitDialog(t *testing.T, w, h int) {
	path := "testdata/fanout.yaml" // relative to the package: the same in the golden every run
	tm, f := startSized(t, w, h, nil)
	keys(tm, ":")
	tm.Type("submit " + path)
	keys(tm, "enter")
	waitFor(t, tm, "Input for workflow fanout", "JSON input, or empty for none")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlS}) // empty: no input
	waitFor(t, tm, "Submit workflow fanout?", "input none")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	if len(f.called()) != 0 {
		t.Fatalf("the dialog alone called %v", f.called())
	}
}

// :submit FILE without an inline input opens the editor: a multi-line
// input reaches the submit compacted.
func TestSubmitWithEditedInput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hello.yaml")
	if err := os.WriteFile(path, []byte("name: hello\ntasks:\n  - key: greet\n    type: echo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tm, f := startSized(t, 80, 24, nil)
	keys(tm, ":")
	tm.Type("submit " + path)
	keys(tm, "enter")
	waitFor(t, tm, "Input for workflow hello", "1 task")
	tm.Type("{")
	keys(tm, "enter")
	tm.Type(`  "who": "ops"`)
	keys(tm, "enter")
	tm.Type("}")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlS})
	waitFor(t, tm, "Submit workflow hello?", `input {"who":"ops"}`)
	keys(tm, "y")
	waitFor(t, tm, "hello  ○ pending")
	finish(t, tm)
	if got := f.called(); len(got) != 1 || got[0] != `submit hello input={"who":"ops"} id=true` {
		t.Fatalf("calls = %v", got)
	}
}
