package tui

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Golden tests: the whole App against the fake client, at 120x40 with the
// ASCII colour profile pinned (what NO_COLOR users see). Regenerate with
// `go test ./tui/ -update`.

func TestMain(m *testing.M) {
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

const termW, termH = 120, 40

// start runs the App against a fresh fake, connected and probed.
func start(t *testing.T, tweak ...func(*Config)) (*teatest.TestModel, *fakeClient) {
	t.Helper()
	f := newFake()
	cfg := Config{Client: f, Prober: f, Endpoints: testEndpoints, Now: fixedNow}
	for _, fn := range tweak {
		fn(&cfg)
	}
	tm := teatest.NewTestModel(t, New(cfg), teatest.WithInitialTermSize(termW, termH))
	t.Cleanup(func() { _ = tm.Quit() })
	tm.Send(connMsg{State: connLive, Endpoint: testEndpoints[0], Node: "n1"})
	waitFor(t, tm, "peers 3/3", "● live", shortID(runID(1)))
	return tm, f
}

// waitFor waits until every text has been drawn (since the last wait).
func waitFor(t *testing.T, tm *teatest.TestModel, texts ...string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		for _, s := range texts {
			if !bytes.Contains(b, []byte(s)) {
				return false
			}
		}
		return true
	}, teatest.WithDuration(5*time.Second), teatest.WithCheckInterval(5*time.Millisecond))
}

// finish quits and returns the final frame.
func finish(t *testing.T, tm *teatest.TestModel) string {
	t.Helper()
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	return tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*App).View()
}

func requireGolden(t *testing.T, tm *teatest.TestModel) string {
	t.Helper()
	v := finish(t, tm)
	golden.RequireEqual(t, []byte(v))
	return v
}

func keys(tm *teatest.TestModel, ks ...string) {
	for _, k := range ks {
		switch k {
		case "enter":
			tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
		case "esc":
			tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
		case "tab":
			tm.Send(tea.KeyMsg{Type: tea.KeyTab})
		case "down":
			tm.Send(tea.KeyMsg{Type: tea.KeyDown})
		default:
			tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)})
		}
	}
}

func TestRunsScreen(t *testing.T) {
	tm, _ := start(t)
	v := requireGolden(t, tm)
	for _, want := range []string{"› " + shortID(runID(12)), "● running", "[all 12]"} {
		if !strings.Contains(v, want) {
			t.Errorf("runs screen lacks %q", want)
		}
	}
}

func TestRunsFilter(t *testing.T) {
	tm, _ := start(t)
	keys(tm, "/")
	tm.Type("billing prod")
	keys(tm, "enter")
	waitFor(t, tm, `filter "billing prod"`)
	v := requireGolden(t, tm)
	if strings.Contains(v, "report ") || strings.Contains(v, "staging") {
		t.Error("filter kept non-matching runs")
	}
}

func TestRunsStateTab(t *testing.T) {
	tm, _ := start(t)
	keys(tm, "l", "l")
	waitFor(t, tm, "[● running 3]")
	v := requireGolden(t, tm)
	if strings.Contains(v, "✓ succeeded  ") {
		t.Error("running tab shows succeeded runs")
	}
}

func TestRunsLiveUpdate(t *testing.T) {
	tm, f := start(t)
	id := runID(12)
	f.setRunState(id, domain.RunSucceeded, 6)
	// No key press: the event alone refreshes the row and the counts.
	tm.Send(eventsMsg{Events: []rpc.Event{{Index: 2001, Kind: "run", RunID: id, Transition: "succeed", From: "running", To: "succeeded", At: fixedNow()}}})
	waitFor(t, tm, "● running 2")
	v := finish(t, tm)
	line := lineWith(v, shortID(id))
	if !strings.Contains(line, "✓ succeeded") || !strings.Contains(line, "6/6") {
		t.Errorf("row not updated in place: %q", line)
	}
}

func lineWith(v, s string) string {
	for _, l := range strings.Split(v, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

func TestRunDetailTasks(t *testing.T) {
	tm, _ := start(t)
	keys(tm, "enter")
	waitFor(t, tm, "Run "+runID(12), "worker-a")
	requireGolden(t, tm)
}

func openRunPane(t *testing.T, tabs int, want ...string) *teatest.TestModel {
	tm, _ := start(t)
	keys(tm, "enter")
	waitFor(t, tm, "Run "+runID(12), "worker-a")
	for range tabs {
		keys(tm, "tab")
	}
	waitFor(t, tm, want...)
	return tm
}

func TestRunDetailGraph(t *testing.T) {
	tm := openRunPane(t, 1, "[Graph]", "[● load]")
	keys(tm, "j", "j")
	waitFor(t, tm, "›[✓ enrich]")
	requireGolden(t, tm)
}

func TestRunDetailTimeline(t *testing.T) {
	tm := openRunPane(t, 2, "[Timeline]", "created")
	requireGolden(t, tm)
}

func TestRunDetailJSON(t *testing.T) {
	tm := openRunPane(t, 3, "[JSON]", `"source"`)
	requireGolden(t, tm)
}

func TestTaskDetail(t *testing.T) {
	tm, _ := start(t)
	keys(tm, "enter")
	waitFor(t, tm, "worker-a")
	keys(tm, "j", "j", "j", "enter")
	waitFor(t, tm, "Task load", "Attempts", "Dependencies", "enrich.parquet")
	requireGolden(t, tm)
}

func TestTaskDetailJSON(t *testing.T) {
	tm, _ := start(t)
	keys(tm, ":")
	tm.Type("task " + shortID(runID(12)) + "/load")
	keys(tm, "enter")
	waitFor(t, tm, "Task load")
	keys(tm, "tab")
	waitFor(t, tm, `"dependencies"`)
	requireGolden(t, tm)
}

func TestQueuesScreen(t *testing.T) {
	tm, _ := start(t)
	// Two tasks of "default" finished in the last buckets: the sparkline.
	tm.Send(eventsMsg{Events: []rpc.Event{
		{Index: 2000, Kind: "task", Queue: "default", To: "succeeded", At: fixedNow().Add(-7 * time.Second)},
		{Index: 2001, Kind: "task", Queue: "default", To: "succeeded", At: fixedNow().Add(-1 * time.Second)},
		{Index: 2002, Kind: "task", Queue: "default", To: "failed", At: fixedNow().Add(-1 * time.Second)},
	}})
	keys(tm, "4")
	waitFor(t, tm, "reports", "✗ open flaky", "2.5 tasks/s", "limit 20/s burst 1 (0 tokens)", "7 throttled claims")
	requireGolden(t, tm)
}

func TestWorkersScreen(t *testing.T) {
	tm, _ := start(t)
	keys(tm, "5")
	waitFor(t, tm, "worker-c", "◌ polling")
	requireGolden(t, tm)
}

func TestClusterScreen(t *testing.T) {
	tm, _ := start(t)
	keys(tm, "6")
	waitFor(t, tm, "Raft configuration", "leader n1 (first seen")
	requireGolden(t, tm)
}

func TestEventsScreen(t *testing.T) {
	tm, _ := start(t)
	keys(tm, "7")
	waitFor(t, tm, "7 events", "breaker")
	requireGolden(t, tm)
}

func TestEventsFilter(t *testing.T) {
	tm, _ := start(t)
	keys(tm, "7")
	waitFor(t, tm, "7 events")
	keys(tm, "/")
	tm.Type("load")
	keys(tm, "enter")
	waitFor(t, tm, `filter "load" (1 match)`)
	requireGolden(t, tm)
}

func TestHelpOverlay(t *testing.T) {
	tm, _ := start(t)
	keys(tm, "?")
	waitFor(t, tm, "Keys: Runs screen")
	v := requireGolden(t, tm)
	for _, want := range []string{"cancel run", "filter", "back/quit", "screens"} {
		if !strings.Contains(v, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestReadOnlyHidesActions(t *testing.T) {
	tm, f := start(t, func(c *Config) { c.ReadOnly = true })
	keys(tm, "c", "?")
	waitFor(t, tm, "Keys: Runs screen")
	v := requireGolden(t, tm)
	if strings.Contains(v, "cancel run") || strings.Contains(v, "Cancel run") {
		t.Error("read-only mode shows an action")
	}
	if len(f.called()) != 0 {
		t.Errorf("read-only mode called %v", f.called())
	}
}

func TestConfirmDialog(t *testing.T) {
	tm, f := start(t)
	keys(tm, "c")
	waitFor(t, tm, "Cancel run "+shortID(runID(12))+"?")
	requireGolden(t, tm)
	if len(f.called()) != 0 {
		t.Fatalf("the dialog alone called %v", f.called())
	}
}

func TestConfirmDialogYes(t *testing.T) {
	tm, f := start(t)
	keys(tm, "c")
	waitFor(t, tm, "Cancel run")
	keys(tm, "y")
	waitFor(t, tm, "cancel accepted")
	finish(t, tm)
	if got := f.called(); !slices.Equal(got, []string{rpc.MethodRunCancel + " " + runID(12)}) {
		t.Fatalf("calls = %v", got)
	}
}

func TestConfirmDialogEnterDefaultsToNo(t *testing.T) {
	tm, f := start(t)
	keys(tm, "c")
	waitFor(t, tm, "Cancel run")
	keys(tm, "enter", "?")
	waitFor(t, tm, "Keys: Runs")
	finish(t, tm)
	if len(f.called()) != 0 {
		t.Fatalf("enter on the default button called %v", f.called())
	}
}

func TestDisconnected(t *testing.T) {
	tm, _ := start(t)
	tm.Send(connMsg{State: connDown, Endpoint: testEndpoints[0], Node: "n1", Since: fixedNow().Add(-4 * time.Second),
		RetryAt: fixedNow().Add(3 * time.Second)})
	waitFor(t, tm, "reconnecting in 3s", "stale")
	v := requireGolden(t, tm)
	if !strings.Contains(v, shortID(runID(12))) {
		t.Error("the last data is not kept on screen")
	}
}

func TestReconnectToAnotherNode(t *testing.T) {
	tm, _ := start(t)
	tm.Send(connMsg{State: connDown, Endpoint: testEndpoints[0], Node: "n1", Since: fixedNow(), RetryAt: fixedNow()})
	waitFor(t, tm, "reconnecting")
	tm.Send(connMsg{State: connLive, Endpoint: testEndpoints[1], Node: "n2"})
	waitFor(t, tm, "node n2", "● live")
	v := finish(t, tm)
	if strings.Contains(v, "stale") {
		t.Error("still marked stale after reconnecting")
	}
}

func TestFreeze(t *testing.T) {
	tm, f := start(t)
	keys(tm, "f")
	waitFor(t, tm, "‖ frozen")
	id := runID(12)
	f.setRunState(id, domain.RunSucceeded, 6)
	tm.Send(eventsMsg{Events: []rpc.Event{{Index: 2001, Kind: "run", RunID: id, To: "succeeded"}}})
	keys(tm, "?")
	waitFor(t, tm, "Keys: Runs")
	keys(tm, "esc", "f")
	waitFor(t, tm, "● running 2")
	finish(t, tm)
}

func TestCommandLine(t *testing.T) {
	tm, _ := start(t)
	keys(tm, ":")
	tm.Type("queue")
	keys(tm, "enter")
	waitFor(t, tm, "[4 Queues]", "reports")
	keys(tm, ":")
	tm.Type("nope")
	keys(tm, "enter")
	waitFor(t, tm, `unknown command "nope"`)
	keys(tm, "q")
	waitFor(t, tm, "[1 Runs]")
	finish(t, tm)
}

func TestBackAndQuit(t *testing.T) {
	tm, _ := start(t)
	keys(tm, "enter")
	waitFor(t, tm, "worker-a")
	keys(tm, "esc", "esc", "esc") // esc never quits
	waitFor(t, tm, "[1 Runs]")
	keys(tm, "q")
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
}

func TestResize(t *testing.T) {
	tm, _ := start(t)
	tm.Send(tea.WindowSizeMsg{Width: 80, Height: 20})
	waitFor(t, tm, "[1 Runs]")
	v := requireGolden(t, tm)
	for _, l := range strings.Split(v, "\n") {
		if w := lipgloss.Width(l); w > 80 {
			t.Fatalf("line wider than 80: %d %q", w, l)
		}
	}
	if n := strings.Count(v, "\n") + 1; n != 20 {
		t.Fatalf("%d lines, want 20", n)
	}
}

func TestQueuePauseDialog(t *testing.T) {
	tm, f := start(t)
	keys(tm, "4")
	waitFor(t, tm, "reports")
	keys(tm, "j", "p") // emails is paused: p offers to resume it
	waitFor(t, tm, "Resume queue emails?")
	keys(tm, "y")
	waitFor(t, tm, "queue emails resumed")
	finish(t, tm)
	if got := f.called(); !slices.Equal(got, []string{"pause emails false"}) {
		t.Fatalf("calls = %v", got)
	}
}

func TestRunQueuePauseDialog(t *testing.T) {
	tm, f := start(t)
	keys(tm, "enter")
	waitFor(t, tm, "worker-a")
	keys(tm, "p")
	waitFor(t, tm, "Pause queue default for run "+shortID(runID(12))+"?")
	keys(tm, "y")
	waitFor(t, tm, "queue default paused for run")
	finish(t, tm)
	if got := f.called(); !slices.Equal(got, []string{"pause default true"}) {
		t.Fatalf("calls = %v", got)
	}
}

func TestRunVerbCommand(t *testing.T) {
	tm, f := start(t)
	keys(tm, ":")
	tm.Type("interrupt " + shortID(runID(12)))
	keys(tm, "enter")
	waitFor(t, tm, "Interrupt run "+shortID(runID(12))+"?")
	keys(tm, "y")
	waitFor(t, tm, "interrupt accepted")
	finish(t, tm)
	if got := f.called(); !slices.Equal(got, []string{rpc.MethodRunInterrupt + " " + runID(12)}) {
		t.Fatalf("calls = %v", got)
	}
}

func TestIllegalVerbIsRefusedWithoutDialog(t *testing.T) {
	tm, f := start(t)
	keys(tm, "j", "c") // the second run succeeded: nothing to cancel
	waitFor(t, tm, "cannot cancel run "+shortID(runID(11)))
	finish(t, tm)
	if len(f.called()) != 0 {
		t.Fatalf("calls = %v", f.called())
	}
}

func TestFastKeysAreSplit(t *testing.T) {
	tm, _ := start(t)
	defer finish(t, tm)
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jj")}) // typed faster than read
	waitFor(t, tm, "› "+shortID(runID(10)))
}
