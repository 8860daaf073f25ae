package tui

import tea "github.com/charmbracelet/bubbletea"

// listLoad is the load cycle the list screens share (queues, schedules,
// workers): a screen is shown or hidden, has had a first answer or not, and
// keeps at most one fetch in flight. What changes meanwhile (an event, a
// resync, a tick) marks it dirty, and it fetches once more when the answer
// arrives; a hidden screen fetches nothing until it is shown again.
//
// A screen embeds it (its fields and methods are the screen's), sets read
// when it is made, and on its answer clears inflight, sets loaded and calls
// plan for what became dirty in between.
type listLoad struct {
	active   bool // the screen is shown
	loaded   bool // an answer arrived
	inflight bool // a fetch is on its way
	dirty    bool // what is shown may be stale
	// read returns the command of the screen's one read; the command
	// captures values (client, params), never the model.
	read func() tea.Cmd
}

// Focus loads the list the first time the screen is shown, and then what
// changed while it was hidden.
func (l *listLoad) Focus() tea.Cmd {
	l.active = true
	if !l.loaded {
		l.dirty = true
	}
	return l.plan()
}

// Blur is called when the screen is hidden.
func (l *listLoad) Blur() { l.active = false }

// plan fetches if the shown list is dirty and no fetch is in flight.
func (l *listLoad) plan() tea.Cmd {
	if !l.active || !l.dirty || l.inflight {
		return nil
	}
	l.inflight, l.dirty = true, false
	return l.read()
}
