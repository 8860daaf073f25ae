package tui

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/rpc"
)

// Messages of the events screen.

// eventsBackfillMsg answers the events.list made when the screen is first
// shown (the recent past; the stream supplies everything after).
type eventsBackfillMsg struct {
	evs []rpc.Event
	err error
}

// backfillEvents is how many of the newest events the first view of the
// stream shows (events.list with latest).
const backfillEvents = 500

// eventsModel is the global event stream, filterable. It records every
// streamed event from the start (up to 5000), shown or not.
type eventsModel struct {
	Common
	outbox
	log        *eventLog
	filter     lineInput
	backfilled bool
	active     bool
}

func newEvents(c Common) *eventsModel {
	return &eventsModel{Common: c, log: newEventLog(c, 5000, true)}
}

// Title is the screen name.
func (m *eventsModel) Title() string { return "Events" }

// SetSize re-lays out the log.
func (m *eventsModel) SetSize(w, h int) {
	m.Common.SetSize(w, h)
	m.log.SetSize(w, max(h-1, 1))
}

// ShortHelp implements help.KeyMap.
func (m *eventsModel) ShortHelp() []key.Binding {
	k := m.Keys
	return []key.Binding{k.Filter, k.Bottom, k.Open, k.Help, k.Quit}
}

// FullHelp implements help.KeyMap.
func (m *eventsModel) FullHelp() [][]key.Binding {
	k := m.Keys
	return [][]key.Binding{k.nav(), {k.Filter, k.Open}, k.global()}
}

// Capturing reports whether the filter input has the keys.
func (m *eventsModel) Capturing() bool { return m.filter.active }

// Back clears a filter; false lets the root go back.
func (m *eventsModel) Back() bool {
	if m.log.query != "" {
		m.log.setQuery("")
		return true
	}
	return false
}

// Focus backfills the recent past once (again after a resync).
func (m *eventsModel) Focus() tea.Cmd {
	m.active = true
	if m.backfilled {
		return nil
	}
	m.backfilled = true
	client := m.Client
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.EventsList(cx, rpc.EventsListParams{Latest: true, Limit: backfillEvents})
		if err != nil {
			return eventsBackfillMsg{err: err}
		}
		return eventsBackfillMsg{evs: res.Events}
	}
}

// Blur is called when the screen is hidden.
func (m *eventsModel) Blur() { m.active = false }

// Update handles keys, the backfill and the stream.
func (m *eventsModel) Update(msg tea.Msg) (*eventsModel, tea.Cmd) {
	switch msg := msg.(type) {
	case eventsBackfillMsg:
		if msg.err != nil {
			m.backfilled = false
			return m, errorCmd(msg.err)
		}
		m.log.merge(msg.evs)
	case eventsMsg:
		m.log.add(msg.Events)
	case resyncMsg:
		m.backfilled = false
		if m.active {
			return m, m.Focus()
		}
	case tea.KeyMsg:
		return m, m.key(msg)
	}
	return m, nil
}

func (m *eventsModel) key(msg tea.KeyMsg) tea.Cmd {
	k := m.Keys
	if m.filter.active {
		switch m.filter.update(msg) {
		case inputSubmit:
			m.filter.stop()
		case inputCancel:
			m.filter.stop()
			m.log.setQuery("")
			return nil
		}
		m.log.setQuery(m.filter.Value())
		return nil
	}
	switch {
	case key.Matches(msg, k.Filter):
		m.filter.start("/", m.log.query)
	case key.Matches(msg, k.Open):
		if ev, ok := m.log.selected(); ok && ev.RunID != "" {
			if ev.TaskKey != "" {
				m.post(openTaskMsg{runID: ev.RunID, key: ev.TaskKey})
			} else {
				m.post(openRunMsg{id: ev.RunID})
			}
		}
	default:
		m.log, _ = m.log.Update(msg)
	}
	return nil
}

// View renders the status line and the log.
func (m *eventsModel) View() string {
	st := m.Styles
	var head string
	switch {
	case m.filter.active:
		head = m.filter.View(st)
	default:
		head = itoa(len(m.log.evs)) + " events (newest last)"
		if m.log.query != "" {
			head += " · filter \"" + m.log.query + "\" (" + itoa(m.log.length()) + " match)"
		}
		if m.log.follow {
			head += " · following"
		} else {
			head += " · paused (G follows)"
		}
		head = st.Subtle.Render(head)
	}
	return fill(head+"\n"+m.log.View(), m.Width, m.Height)
}
