package tui

import (
	"slices"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// addWaitTask gives run 12 a waiting task of type wait after load.
func addWaitTask(f *fakeClient) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := runID(12)
	f.tasks[id] = append(f.tasks[id], rpc.Task{ID: id + "/sign-off", RunID: id, Key: "sign-off", Type: "wait", Queue: "default",
		State: domain.TaskReady, Waiting: true, Signal: "approval", FencingToken: 61, Deps: []string{"load"}, MaxAttempts: 1,
		DeadlineAt: fixedNow().Add(3600e9)})
}

func openWaitTask(t *testing.T, w, h int) (*teatest.TestModel, *fakeClient) {
	tm, f := startSized(t, w, h, addWaitTask)
	keys(tm, ":")
	tm.Type("task " + shortID(runID(12)) + "/sign-off")
	keys(tm, "enter")
	waitFor(t, tm, "Task sign-off", "waiting for a signal (signal approval)", "a approves")
	return tm, f
}

func TestApproveDialog(t *testing.T) { testApproveDialog(t, 80, 24) }

func TestApproveDialog160x45(t *testing.T) { testApproveDialog(t, 160, 45) }

func testApproveDialog(t *testing.T, w, h int) {
	tm, f := openWaitTask(t, w, h)
	keys(tm, "a")
	waitFor(t, tm, "approve sign-off with payload")
	tm.Type(`{"ok":true,"by":"ops"}`)
	keys(tm, "enter")
	waitFor(t, tm, "Approve task sign-off?")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	if !strings.Contains(v, `payload {"ok":true,"by":"ops"}`) {
		t.Error("the dialog does not show the payload")
	}
	if len(f.called()) != 0 {
		t.Fatalf("the dialog alone called %v", f.called())
	}
}

func TestApproveCallsTaskSignal(t *testing.T) {
	tm, f := openWaitTask(t, 120, 40)
	keys(tm, "a")
	waitFor(t, tm, "approve sign-off with payload")
	tm.Type(`{"ok":true}`)
	keys(tm, "enter")
	waitFor(t, tm, "Approve task sign-off?")
	keys(tm, "y")
	waitFor(t, tm, "task sign-off approved (index 2100)")
	finish(t, tm)
	want := []string{"signal " + runID(12) + `/sign-off {"ok":true} token=61 id=true`}
	if got := f.called(); !slices.Equal(got, want) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
}

func TestApproveWithoutPayloadAndBadJSON(t *testing.T) {
	tm, f := openWaitTask(t, 120, 40)
	keys(tm, "a")
	waitFor(t, tm, "approve sign-off with payload")
	tm.Type(`{oops`)
	keys(tm, "enter")
	waitFor(t, tm, "the payload is not valid JSON")
	for range len(`{oops`) {
		tm.Send(tea.KeyMsg{Type: tea.KeyBackspace})
	}
	keys(tm, "enter")
	waitFor(t, tm, "Approve task sign-off?", "payload none")
	keys(tm, "y")
	waitFor(t, tm, "task sign-off approved")
	finish(t, tm)
	want := []string{"signal " + runID(12) + "/sign-off  token=61 id=true"}
	if got := f.called(); !slices.Equal(got, want) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
}

func TestApproveRefusedOnOtherTasks(t *testing.T) {
	tm, f := start(t)
	keys(tm, ":")
	tm.Type("task " + shortID(runID(12)) + "/load")
	keys(tm, "enter")
	waitFor(t, tm, "Task load")
	keys(tm, "a")
	waitFor(t, tm, "task load is not a waiting wait task")
	finish(t, tm)
	if len(f.called()) != 0 {
		t.Fatalf("calls = %v", f.called())
	}
}

func TestApproveReadOnly(t *testing.T) {
	tm, f := start(t, func(c *Config) { c.ReadOnly = true })
	addWaitTask(f)
	keys(tm, ":")
	tm.Type("task " + shortID(runID(12)) + "/sign-off")
	keys(tm, "enter")
	waitFor(t, tm, "waiting for a signal")
	keys(tm, "a", "?")
	waitFor(t, tm, "Keys: Task")
	v := finish(t, tm)
	if strings.Contains(v, "approve") || len(f.called()) != 0 {
		t.Fatalf("read-only offers approval (calls %v)", f.called())
	}
}
