package tui

import (
	"fmt"
	"slices"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// bigFake holds n runs (every third one running, the rest succeeded).
func bigFake(n int) *fakeClient {
	f := newFake()
	f.runs = make([]rpc.Run, 0, n)
	for i := n; i >= 1; i-- {
		st := domain.RunSucceeded
		if i%3 == 0 {
			st = domain.RunRunning
		}
		f.runs = append(f.runs, rpc.Run{ID: runID(i), Workflow: fmt.Sprintf("wf-%d", i%7), State: st, TaskCount: 5, Done: i % 6,
			CreatedAt: t0, StartedAt: t0.Add(time.Second), Labels: map[string]string{"n": fmt.Sprint(i % 10)}})
	}
	return f
}

// drive runs cmd and feeds its messages back into m until nothing is left.
func drive(m *runsModel, cmd tea.Cmd) {
	queue := []tea.Cmd{cmd}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if c == nil {
			continue
		}
		switch msg := c().(type) {
		case tea.BatchMsg:
			queue = append(queue, msg...)
		case nil:
		case errMsg:
			panic(msg.err)
		default:
			var next tea.Cmd
			m, next = m.Update(msg)
			queue = append(queue, next)
		}
	}
}

func newTestRuns(f *fakeClient, h int) *runsModel {
	m := newRuns(Common{Styles: NewStyles(true), Keys: NewKeyMap(false), Client: f, Now: fixedNow})
	m.SetSize(120, h)
	drive(m, m.Focus())
	return m
}

func ids(rows []rpc.Run) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func rkey(k string) tea.KeyMsg { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)} }

func TestMergePage(t *testing.T) {
	r := func(ids ...int) []rpc.Run {
		var out []rpc.Run
		for _, i := range ids {
			out = append(out, rpc.Run{ID: runID(i)})
		}
		return out
	}
	// A window in the middle replaces what it covers and keeps the rest.
	rows, more, next := mergePage(r(9, 8, 7, 6, 5), runID(8), r(7, 5, 4), runID(4), true, runID(5))
	if !slices.Equal(ids(rows), ids(r(9, 8, 7, 5, 4))) || !more || next != runID(4) {
		t.Fatalf("window: %v %v %v", ids(rows), more, next)
	}
	// A window that reaches past the loaded prefix extends it.
	rows, more, next = mergePage(r(9, 8), runID(9), r(8, 7, 6), runID(6), true, runID(8))
	if !slices.Equal(ids(rows), ids(r(9, 8, 7, 6))) || !more || next != runID(6) {
		t.Fatalf("extend: %v %v %v", ids(rows), more, next)
	}
	// The head with new runs keeps older loaded rows below it.
	rows, more, _ = mergePage(r(9, 8, 7, 6), "", r(11, 10, 9), runID(9), true, runID(6))
	if !slices.Equal(ids(rows), ids(r(11, 10, 9, 8, 7, 6))) || !more {
		t.Fatalf("head: %v", ids(rows))
	}
	// A page that reaches the end drops what is below the cursor.
	rows, more, _ = mergePage(r(9, 8, 7, 6), runID(8), r(6), "", true, runID(6))
	if !slices.Equal(ids(rows), ids(r(9, 8, 6))) || more {
		t.Fatalf("end: %v %v", ids(rows), more)
	}
}

func TestRunsPagesLazily(t *testing.T) {
	f := bigFake(2500)
	m := newTestRuns(f, 40)
	if len(m.rows) >= 200 || !m.more {
		t.Fatalf("first load took %d rows (more=%v): want one screenful plus a margin", len(m.rows), m.more)
	}
	first := len(m.rows)
	for range first {
		drive(m, m.key(rkey("j")))
	}
	if len(m.rows) <= first {
		t.Fatalf("scrolling to the end did not load the next page (%d rows)", len(m.rows))
	}
	drive(m, m.key(rkey("G")))
	if len(m.rows) != 2500 || m.more || m.nav.cursor != 2499 {
		t.Fatalf("G: %d rows, more=%v, cursor=%d", len(m.rows), m.more, m.nav.cursor)
	}
	for i := 1; i < len(m.rows); i++ {
		if m.rows[i].ID >= m.rows[i-1].ID {
			t.Fatalf("rows out of server order at %d", i)
		}
	}
}

func TestRunsLiveRowsAndNewRuns(t *testing.T) {
	f := bigFake(500)
	m := newTestRuns(f, 40)
	calls := f.listN
	// A run on screen changes; a new run is submitted.
	f.setRunState(runID(495), domain.RunFailed, 2)
	f.mu.Lock()
	f.runs = append([]rpc.Run{{ID: runID(501), Workflow: "new", State: domain.RunPending, TaskCount: 1}}, f.runs...)
	f.mu.Unlock()
	drive(m, func() tea.Msg {
		return eventsMsg{Events: []rpc.Event{
			{Kind: "run", RunID: runID(495), To: "failed"},
			{Kind: "task", RunID: runID(495), TaskKey: "x"},
			{Kind: "run", RunID: runID(501), Transition: "created", To: "pending"},
			{Kind: "task", RunID: runID(3), TaskKey: "x"}, // not loaded: ignored
		}}
	})
	if f.listN-calls != 1 {
		t.Errorf("%d run.list calls for one batch of events, want 1", f.listN-calls)
	}
	if m.rows[0].ID != runID(501) || m.rows[6].State != domain.RunFailed {
		t.Fatalf("rows not updated: %s %s", m.rows[0].ID, m.rows[6].State)
	}
	if m.counts["pending"] != 1 || m.counts["failed"] != 1 {
		t.Errorf("counts not updated: %v", m.counts)
	}
	// The selection follows its run when a row is inserted above it.
	if got := m.rows[m.rowAt(m.nav.cursor)].ID; got != runID(500) {
		t.Errorf("selection moved to %s", got)
	}
}

func TestRunsStateTabDropsLeavers(t *testing.T) {
	f := bigFake(90)
	m := newTestRuns(f, 40)
	drive(m, m.key(rkey("l")))
	drive(m, m.key(rkey("l"))) // running
	if m.tabState() != domain.RunRunning || len(m.rows) != 30 {
		t.Fatalf("running tab: %s %d rows", m.tabState(), len(m.rows))
	}
	f.setRunState(runID(87), domain.RunSucceeded, 5)
	drive(m, func() tea.Msg {
		return eventsMsg{Events: []rpc.Event{{Kind: "run", RunID: runID(87), To: "succeeded"}}}
	})
	if len(m.rows) != 29 || slices.Contains(ids(m.rows), runID(87)) {
		t.Fatalf("run that left the state still listed (%d rows)", len(m.rows))
	}
}

func TestRunsFilterAndSortLoadEverything(t *testing.T) {
	f := bigFake(2500)
	m := newTestRuns(f, 40)
	drive(m, m.setQuery("wf-3 n=5"))
	if m.more || len(m.rows) != 2500 {
		t.Fatalf("filter did not load every page: %d", len(m.rows))
	}
	for i := range m.length() {
		r := m.rows[m.rowAt(i)]
		if r.Workflow != "wf-3" || r.Labels["n"] != "5" {
			t.Fatalf("filter kept %s %s", r.Workflow, labels(r.Labels))
		}
	}
	drive(m, m.setQuery(""))
	drive(m, m.key(rkey("s"))) // by workflow
	prev := ""
	for i := range m.length() {
		w := m.rows[m.rowAt(i)].Workflow
		if w > prev && prev != "" {
			break // descending: the first change must go down
		}
		prev = w
	}
	if m.rows[m.rowAt(0)].Workflow != "wf-6" {
		t.Fatalf("sort by workflow (descending) starts with %s", m.rows[m.rowAt(0)].Workflow)
	}
}

// BenchmarkRunsView10k renders the runs screen with 10,000 runs loaded.
func BenchmarkRunsView10k(b *testing.B) {
	f := bigFake(10000)
	m := newRuns(Common{Styles: NewStyles(false), Keys: NewKeyMap(false), Client: f, Now: fixedNow})
	m.SetSize(160, 45)
	drive(m, m.Focus())
	drive(m, m.key(rkey("G"))) // load all 10,000
	if len(m.rows) != 10000 {
		b.Fatalf("%d rows", len(m.rows))
	}
	m.nav.to(5000)
	for _, p := range []struct {
		name    string
		profile termenv.Profile
	}{{"ascii", termenv.Ascii}, {"truecolor", termenv.TrueColor}} {
		b.Run(p.name, func(b *testing.B) {
			lipgloss.SetColorProfile(p.profile)
			defer lipgloss.SetColorProfile(termenv.Ascii)
			m.Styles = NewStyles(false) // fresh render caches
			b.ReportAllocs()
			for b.Loop() {
				_ = m.View()
			}
		})
	}
}

// BenchmarkRunsFilter10k measures re-filtering 10,000 loaded runs (done
// once per batch of events while a filter is active).
func BenchmarkRunsFilter10k(b *testing.B) {
	f := bigFake(10000)
	m := newRuns(Common{Styles: NewStyles(false), Keys: NewKeyMap(false), Client: f, Now: fixedNow})
	m.SetSize(160, 45)
	drive(m, m.Focus())
	drive(m, m.setQuery("wf-3"))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		m.refresh()
	}
}
