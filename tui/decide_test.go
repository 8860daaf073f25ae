package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// A run that decided: a branch skipped by its condition (and its dependent
// by the default trigger rule), a one_failed notifier that ran, and a
// finally task. The skipped state renders with its glyph in the graph at
// both sizes.

var decideRunID = runID(14)

func addDecideRun(f *fakeClient) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := rpc.Run{ID: decideRunID, Workflow: "decide", State: domain.RunRunning, CreatedAt: t0.Add(8 * time.Minute),
		StartedAt: t0.Add(8*time.Minute + time.Second), TaskCount: 7, Done: 6}
	f.runs = append([]rpc.Run{r}, f.runs...)
	type node struct {
		key, typ string
		state    domain.TaskState
		deps     []string
		err      string
		finally  bool
	}
	for _, n := range []node{
		{"build", "echo", domain.TaskSucceeded, nil, "", false},
		{"deploy-prod", "echo", domain.TaskSkipped, []string{"build"}, "skipped: when is false: input.env == 'prod'", false},
		{"announce", "echo", domain.TaskSkipped, []string{"deploy-prod"}, "skipped: trigger all_succeeded not met", false},
		{"smoke-test", "ship", domain.TaskFailed, []string{"build"}, "carrier rejected", false},
		{"page-oncall", "report", domain.TaskSucceeded, []string{"smoke-test"}, "", false},
		{"cleanup", "echo", domain.TaskSucceeded, []string{"announce", "page-oncall"}, "", false},
		{"report", "echo", domain.TaskRunning, nil, "", true},
	} {
		f.tasks[r.ID] = append(f.tasks[r.ID], rpc.Task{ID: r.ID + "/" + n.key, RunID: r.ID, Key: n.key, Type: n.typ,
			Queue: "default", State: n.state, Deps: n.deps, Error: n.err, MaxAttempts: 1, Finally: n.finally})
	}
}

func testDecideGraph(t *testing.T, w, h int) {
	tm, _ := startSized(t, w, h, addDecideRun)
	openGraph(t, tm, decideRunID, "[↷ deploy-prod]", "[↷ announce]")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	if !strings.Contains(v, "✗ smoke-test") {
		t.Error("the failed branch is not drawn")
	}
}

func TestGraphSkipped80x24(t *testing.T)  { testDecideGraph(t, 80, 24) }
func TestGraphSkipped160x45(t *testing.T) { testDecideGraph(t, 160, 45) }
