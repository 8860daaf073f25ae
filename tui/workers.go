package tui

import (
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/rpc"
)

// Messages of the workers screen.

// workersLoadedMsg answers workers.list.
type workersLoadedMsg struct {
	res *rpc.WorkersResult
	err error
}

// workersTickMsg is the slow refresh of the workers screen.
type workersTickMsg struct{}

// workersEvery refreshes workers.list while the screen is shown: worker
// liveness (long polls, heartbeats) produces no events, so this is the one
// list that is re-read on a timer. Task events (claims and completions
// change in-flight counts) also trigger a refetch.
const workersEvery = 5 * time.Second

// workersModel lists the workers the leader has seen recently.
type workersModel struct {
	Common
	outbox
	listLoad
	workers []rpc.Worker
	nav     listNav
	ticking bool
}

func newWorkers(c Common) *workersModel {
	m := &workersModel{Common: c}
	m.listLoad.read = m.fetch
	return m
}

// Title is the screen name.
func (m *workersModel) Title() string { return "Workers" }

func (m *workersModel) listHeight() int { return max(m.Height-2, 1) }

// SetSize re-lays out the list.
func (m *workersModel) SetSize(w, h int) {
	m.Common.SetSize(w, h)
	m.nav.set(len(m.workers), m.listHeight())
}

// ShortHelp implements help.KeyMap.
func (m *workersModel) ShortHelp() []key.Binding {
	k := m.Keys
	return []key.Binding{k.Up, k.Down, k.Help, k.Quit}
}

// FullHelp implements help.KeyMap.
func (m *workersModel) FullHelp() [][]key.Binding {
	return [][]key.Binding{m.Keys.nav(), m.Keys.global()}
}

// Capturing: no text input.
func (m *workersModel) Capturing() bool { return false }

// Back never consumes esc.
func (m *workersModel) Back() bool { return false }

// Focus loads the workers (every time: they change without events) and
// starts the slow refresh.
func (m *workersModel) Focus() tea.Cmd {
	m.dirty = true
	cmds := []tea.Cmd{m.listLoad.Focus()}
	if !m.ticking {
		m.ticking = true
		cmds = append(cmds, tea.Tick(workersEvery, func(time.Time) tea.Msg { return workersTickMsg{} }))
	}
	return tea.Batch(cmds...)
}

// fetch reads workers.list.
func (m *workersModel) fetch() tea.Cmd {
	client := m.Client
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.WorkersList(cx)
		return workersLoadedMsg{res: res, err: err}
	}
}

// Update handles keys, loads, events and the refresh tick.
func (m *workersModel) Update(msg tea.Msg) (*workersModel, tea.Cmd) {
	switch msg := msg.(type) {
	case workersLoadedMsg:
		m.inflight = false
		if msg.err != nil {
			return m, errorCmd(msg.err)
		}
		sel := ""
		if m.nav.n > 0 {
			sel = m.workers[m.nav.cursor].ID
		}
		m.workers, m.loaded = msg.res.Workers, true
		slices.SortFunc(m.workers, func(a, b rpc.Worker) int { return strings.Compare(a.ID, b.ID) })
		m.nav.set(len(m.workers), m.listHeight())
		if i := slices.IndexFunc(m.workers, func(w rpc.Worker) bool { return w.ID == sel }); i >= 0 {
			m.nav.to(i)
		}
		return m, m.plan()
	case workersTickMsg:
		if !m.active {
			m.ticking = false
			return m, nil
		}
		m.dirty = true
		return m, tea.Batch(m.plan(), tea.Tick(workersEvery, func(time.Time) tea.Msg { return workersTickMsg{} }))
	case eventsMsg:
		for _, e := range msg.Events {
			if e.Kind == "task" && (e.To == "running" || e.From == "running") {
				m.dirty = true
			}
		}
		return m, m.plan()
	case resyncMsg:
		m.dirty = true
		return m, m.plan()
	case tea.KeyMsg:
		m.nav.key(m.Keys, msg)
	}
	return m, nil
}

// View renders the table.
func (m *workersModel) View() string {
	st, now := m.Styles, m.Now()
	head := itoa(len(m.workers)) + " workers seen by the leader in the last 2 minutes"
	if !m.loaded {
		head = "loading workers…"
	}
	cols := []column{{Title: "WORKER", Min: 12, Flex: 2}, {Title: "QUEUES", Min: 8, Flex: 2}, {Title: "TYPES", Min: 8, Flex: 3},
		{Title: "IN-FLIGHT", Width: 9, Right: true}, {Title: "STATE", Width: 11}, {Title: "HEARTBEAT", Width: 10, Right: true},
		{Title: "SEEN", Width: 10, Right: true}, {Title: "NODE", Width: 6}}
	t := newTable(st, cols, m.Width)
	body := t.render(m.nav, m.listHeight()+1, "no workers (a worker shows up when it long-polls task.claim)", func(i int) []string {
		w := &m.workers[i]
		state := st.Paint("running", "● busy")
		switch {
		case w.InFlight > 0:
		case w.Waiting:
			state = st.Paint("ready", "◌ polling")
		default:
			state = st.Paint("pending", "○ idle")
		}
		hb := "-"
		if !w.LastHeartbeat.IsZero() {
			hb = strings.TrimSuffix(ago(now, w.LastHeartbeat), " ago")
		}
		return []string{w.ID, dash(strings.Join(w.Queues, ",")), dash(strings.Join(w.Types, ",")), itoa(w.InFlight), state, hb,
			strings.TrimSuffix(ago(now, w.LastSeen), " ago"), dash(w.Node)}
	})
	return fill(st.Subtle.Render(head)+"\n"+body, m.Width, m.Height)
}
