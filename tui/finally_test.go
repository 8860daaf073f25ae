package tui

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// A run's finally tasks are a group of their own: drawn in a band below
// the body's graph under a "finally" rule (not among the body's roots, as
// if they ran first), and listed last in the task table under the same
// rule.

// addFinallyRun: the decide run (decide_test.go) with a second finally
// task that depends on the first.
func addFinallyRun(f *fakeClient) {
	addDecideRun(f)
	f.mu.Lock()
	defer f.mu.Unlock()
	r := decideRunID
	// Run order as the agent keeps it: the finally tasks among the body's.
	ts := f.tasks[r]
	archive := rpc.Task{ID: r + "/archive", RunID: r, Key: "archive", Type: "echo", Queue: "default", State: domain.TaskPending,
		Deps: []string{"report"}, MaxAttempts: 1, Finally: true}
	f.tasks[r] = append([]rpc.Task{ts[0], archive}, ts[1:]...)
}

// lineIndex is the index of the first line holding s; a leading "\n" in
// s anchors it at the start of the line.
func lineIndex(v, s string) int {
	anchored := strings.HasPrefix(s, "\n")
	s = strings.TrimPrefix(s, "\n")
	for i, l := range strings.Split(v, "\n") {
		if anchored && strings.HasPrefix(l, s) || !anchored && strings.Contains(l, s) {
			return i
		}
	}
	return -1
}

func testFinallyGraph(t *testing.T, w, h int) {
	tm, _ := startSized(t, w, h, addFinallyRun)
	openGraph(t, tm, decideRunID, "[● report]", "[○ archive]")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	rule, report, build := lineIndex(v, "finally: runs once the body"), lineIndex(v, "[● report]"), lineIndex(v, "[✓ build]")
	if rule < 0 || report <= rule || build >= rule {
		t.Errorf("the finally tasks are not drawn below the body under the rule (build %d, rule %d, report %d):\n%s", build, rule, report, v)
	}
	if !strings.Contains(lineWith(v, "[● report]"), "▶ [○ archive]") {
		t.Errorf("the finally band does not draw its own edges:\n%s", v)
	}
}

func TestFinallyGraph80x24(t *testing.T)  { testFinallyGraph(t, 80, 24) }
func TestFinallyGraph160x45(t *testing.T) { testFinallyGraph(t, 160, 45) }

func testFinallyTasks(t *testing.T, w, h int) {
	tm, _ := startSized(t, w, h, addFinallyRun)
	keys(tm, ":")
	tm.Type("run " + shortID(decideRunID))
	keys(tm, "enter")
	waitFor(t, tm, "Run "+decideRunID, "page-oncall", "archive")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	row := func(key string) int { return lineIndex(v, "\n  "+key+" ") } // the KEY column, not TYPE
	rule, cleanup, report, archive := lineIndex(v, "finally: runs once the body"), row("cleanup"), row("report"), row("archive")
	if cleanup < 0 || report < 0 || archive < 0 || !(cleanup < rule && rule < report && rule < archive) {
		t.Errorf("the finally tasks are not listed last under the rule (cleanup %d, rule %d, report %d, archive %d):\n%s",
			cleanup, rule, report, archive, v)
	}
}

func TestFinallyTasks80x24(t *testing.T)  { testFinallyTasks(t, 80, 24) }
func TestFinallyTasks160x45(t *testing.T) { testFinallyTasks(t, 160, 45) }
