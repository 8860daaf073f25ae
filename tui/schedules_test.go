package tui

import (
	"slices"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/flowd/flowd/rpc"
)

func TestSchedulesScreen(t *testing.T) {
	tm, _ := start(t)
	keys(tm, "8")
	waitFor(t, tm, "[8 Schedules]", "nightly-etl", "2 schedules · 1 paused")
	v := requireGolden(t, tm)
	row := lineWith(v, "nightly-etl")
	for _, want := range []string{"› nightly-etl", "0 2 * * *", "Europe/Paris", "● active", "in 1h30m", "22h30m", " 11 ", " 2"} {
		if !strings.Contains(row, want) {
			t.Errorf("row %q lacks %q", row, want)
		}
	}
	ping := lineWith(v, "ping ")
	for _, want := range []string{"every 30s", "‖ paused", "5m00s", " 40 "} {
		if !strings.Contains(ping, want) {
			t.Errorf("row %q lacks %q", ping, want)
		}
	}
	if !strings.Contains(v, "schedule nightly-etl · workflow etl · overlap skip") {
		t.Error("no detail of the selected schedule")
	}
}

func TestSchedulesCommandLine(t *testing.T) {
	tm, _ := start(t)
	keys(tm, ":")
	tm.Type("sched")
	keys(tm, "enter")
	waitFor(t, tm, "[8 Schedules]", "nightly-etl")
	finish(t, tm)
}

func TestSchedulePauseResumeTrigger(t *testing.T) {
	tm, f := start(t)
	keys(tm, "8")
	waitFor(t, tm, "nightly-etl")
	keys(tm, "p")
	waitFor(t, tm, "schedule nightly-etl paused")
	keys(tm, "j", "p") // ping is paused: p resumes it
	waitFor(t, tm, "schedule ping resumed")
	keys(tm, "t")
	waitFor(t, tm, "schedule ping triggered: run")
	finish(t, tm)
	want := []string{"schedule pause nightly-etl true", "schedule pause ping false", "schedule trigger ping"}
	if got := f.called(); !slices.Equal(got, want) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
}

func TestScheduleDeleteAsksFirst(t *testing.T) {
	tm, f := start(t)
	keys(tm, "8")
	waitFor(t, tm, "nightly-etl")
	keys(tm, "d")
	waitFor(t, tm, "Delete schedule nightly-etl?")
	keys(tm, "n", "j") // declined: nothing called
	waitFor(t, tm, "› ping")
	keys(tm, "k")
	waitFor(t, tm, "› nightly-etl")
	keys(tm, "d")
	waitFor(t, tm, "Delete schedule nightly-etl?")
	if got := f.called(); len(got) != 0 {
		t.Fatalf("the dialog alone called %v", got)
	}
	keys(tm, "y")
	waitFor(t, tm, "schedule nightly-etl deleted")
	// The schedule event refreshes the list: the deleted one is gone.
	tm.Send(eventsMsg{Events: []rpc.Event{{Index: 2001, Kind: "schedule", Name: "nightly-etl", Transition: "delete"}}})
	waitFor(t, tm, "1 schedule · 1 paused")
	v := finish(t, tm)
	if strings.Contains(v, "› nightly-etl") || strings.Contains(v, "  nightly-etl") {
		t.Error("the deleted schedule is still listed")
	}
	if got := f.called(); !slices.Equal(got, []string{"schedule delete nightly-etl"}) {
		t.Fatalf("calls = %v", got)
	}
}

func TestSchedulesReadOnly(t *testing.T) {
	tm, f := start(t, func(c *Config) { c.ReadOnly = true })
	keys(tm, "8")
	waitFor(t, tm, "nightly-etl")
	keys(tm, "p", "t", "d", "?")
	waitFor(t, tm, "Keys: Schedules screen")
	v := finish(t, tm)
	if strings.Contains(v, "trigger now") || strings.Contains(v, "Delete schedule") {
		t.Error("read-only mode shows a schedule action")
	}
	if len(f.called()) != 0 {
		t.Errorf("read-only mode called %v", f.called())
	}
}

// Only schedule events refetch the list: task traffic costs no call.
func TestSchedulesRefetchOnScheduleEventsOnly(t *testing.T) {
	tm, f := start(t)
	keys(tm, "8")
	waitFor(t, tm, "nightly-etl")
	n := f.schedLists()
	tm.Send(eventsMsg{Events: []rpc.Event{{Index: 2001, Kind: "task", RunID: runID(12), TaskKey: "load", To: "succeeded"}}})
	f.mu.Lock()
	f.scheds[0].Started = 12
	f.mu.Unlock()
	tm.Send(eventsMsg{Events: []rpc.Event{{Index: 2002, Kind: "schedule", Name: "nightly-etl", Transition: "fire"}}})
	waitFor(t, tm, "runs 12")
	finish(t, tm)
	if got := f.schedLists() - n; got != 1 {
		t.Fatalf("%d schedule.list calls after one schedule event, want 1", got)
	}
}

// The help box of every screen, and the tabs, fit an 80x24 terminal.
func TestHelpFits80x24(t *testing.T) {
	tm, _ := start(t)
	tm.Send(tea.WindowSizeMsg{Width: 80, Height: 24})
	keys(tm, "8")
	waitFor(t, tm, "nightly-etl")
	keys(tm, "?")
	waitFor(t, tm, "Keys: Schedules screen")
	v := finish(t, tm)
	lines := strings.Split(v, "\n")
	if len(lines) != 24 {
		t.Fatalf("%d lines, want 24", len(lines))
	}
	for _, l := range lines {
		if w := lipgloss.Width(l); w > 80 {
			t.Fatalf("line wider than 80: %d %q", w, l)
		}
	}
	for _, want := range []string{"╭", "╰", "8 Schedules", "trigger now", "pause/resume", "delete", ":schedules", "? or esc closes"} {
		if !strings.Contains(v, want) {
			t.Errorf("80x24 help lacks %q:\n%s", want, v)
		}
	}
}
