package tui

import (
	"slices"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// A filter that is a label selector is sent to the server as run.list's
// selector (typed at the / prompt), and the list pages lazily from the
// server's answer instead of loading every run; other text filters the
// loaded runs as before; a selector that does not parse says why and keeps
// the last valid one; esc clears it.
func TestRunsFilterSendsSelectors(t *testing.T) {
	f := bigFake(2500) // label n = i % 10
	m := newTestRuns(f, 40)
	drive(m, m.key(rkey("/")))
	for _, r := range "n=5" {
		drive(m, m.key(rkey(string(r))))
	}
	drive(m, m.key(tea.KeyMsg{Type: tea.KeyEnter}))
	if got := f.selectors[len(f.selectors)-1]; got != "n=5" {
		t.Fatalf("last run.list selector %q, want n=5 (all: %q)", got, f.selectors)
	}
	if len(m.rows) == 0 || len(m.rows) >= 250 || !m.more {
		t.Fatalf("%d rows loaded (more %v): want the server's first page of the 250 matches", len(m.rows), m.more)
	}
	for i := range m.length() {
		if r := m.rows[m.rowAt(i)]; r.Labels["n"] != "5" {
			t.Fatalf("selector n=5 shows %s with %s", r.ID, labels(r.Labels))
		}
	}
	if v := m.statusView(); !strings.Contains(v, `selector "n=5" (server)`) || strings.Contains(v, "match)") {
		t.Fatalf("status line: %s", v)
	}

	drive(m, m.setQuery("n!=5, n!=6,!nosuch"))
	drive(m, m.key(rkey("G"))) // every page of the selector's runs
	if len(m.rows) != 2000 {
		t.Fatalf("n!=5,n!=6: %d rows, want 2000", len(m.rows))
	}
	for _, r := range m.rows {
		if n := r.Labels["n"]; n == "5" || n == "6" {
			t.Fatalf("n!=5,n!=6 shows %s with n=%s", r.ID, n)
		}
	}

	calls := len(f.selectors)
	drive(m, m.setQuery("n!=5,"))
	if len(f.selectors) != calls || m.selector != "n!=5, n!=6,!nosuch" || len(m.rows) != 2000 {
		t.Fatalf("a bad selector changed the list: %d calls, selector %q, %d rows", len(f.selectors)-calls, m.selector, len(m.rows))
	}
	if v := m.statusView(); !strings.Contains(v, `selector: selector term 2 "": empty term`) {
		t.Fatalf("status line for a bad selector: %s", v)
	}

	// Words are the text filter: no selector, every page loaded.
	drive(m, m.setQuery("wf-3 n=5"))
	if got := f.selectors[len(f.selectors)-1]; got != "" || m.more || len(m.rows) != 2500 {
		t.Fatalf("text filter: selector %q, more %v, %d rows", got, m.more, len(m.rows))
	}
	for i := range m.length() {
		if r := m.rows[m.rowAt(i)]; r.Workflow != "wf-3" || r.Labels["n"] != "5" {
			t.Fatalf("text filter kept %s %s", r.Workflow, labels(r.Labels))
		}
	}
	if m.length() == 0 {
		t.Fatal("text filter matched nothing")
	}

	drive(m, m.setQuery("!n"))
	if m.selector != "!n" || m.nav.n != 0 || !strings.Contains(m.View(), "no run matches the selector") {
		t.Fatalf("!n: selector %q, %d rows\n%s", m.selector, m.nav.n, m.View())
	}
	if !m.Back() {
		t.Fatal("esc did not clear the selector")
	}
	for _, msg := range m.take() { // what the root routes back
		var cmd tea.Cmd
		m, cmd = m.Update(msg)
		drive(m, cmd)
	}
	if m.selector != "" || f.selectors[len(f.selectors)-1] != "" || len(m.rows) == 0 {
		t.Fatalf("after esc: selector %q, last call %q, %d rows", m.selector, f.selectors[len(f.selectors)-1], len(m.rows))
	}
}

// Through the whole app: a selector typed at / lists the server's answer,
// and esc (handled by the root) clears it and reloads every run.
func TestAppRunsSelector(t *testing.T) {
	tm, f := start(t) // even runs env=prod (12 also team=data), odd staging
	keys(tm, "/")
	tm.Type("env=prod,team!=data")
	keys(tm, "enter")
	waitFor(t, tm, `selector "env=prod,team!=data" (server)`, "rows 1-5 of 5")
	keys(tm, "esc")
	waitFor(t, tm, "rows 1-12 of 12")
	v := finish(t, tm)
	if strings.Contains(v, "selector") || !strings.Contains(v, shortID(runID(11))) {
		t.Fatalf("after esc:\n%s", v)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.selectors, "env=prod,team!=data") || f.selectors[len(f.selectors)-1] != "" {
		t.Fatalf("run.list selectors: %q", f.selectors)
	}
}
