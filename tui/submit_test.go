package tui

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

func TestEditReplayPrefillsCommandLine(t *testing.T) {
	tm, f := startSized(t, 160, 45, nil)
	keys(tm, "e") // on run 12, whose input is known
	waitFor(t, tm, ":replay "+runID(12)+` {"source":"s3://bucket/day=2025-06-01"`)
	for range len(`"tags":["a","b"]}`) {
		tm.Send(tea.KeyMsg{Type: tea.KeyBackspace})
	}
	tm.Type(`"tags":["c"]}`)
	keys(tm, "enter")
	waitFor(t, tm, "Replay run "+shortID(runID(12))+" with new input?", `"tags":["c"]}`)
	keys(tm, "y")
	waitFor(t, tm, "replay of "+shortID(runID(12)))
	finish(t, tm)
	want := []string{"replay " + runID(12) + ` input={"source":"s3://bucket/day=2025-06-01","rows":1200,"dry_run":false,"tags":["c"]}`}
	if got := f.called(); !slices.Equal(got, want) {
		t.Fatalf("calls = %v\nwant    %v", got, want)
	}
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
	waitFor(t, tm, "Submit workflow fanout?", "input none")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	if len(f.called()) != 0 {
		t.Fatalf("the dialog alone called %v", f.called())
	}
}
