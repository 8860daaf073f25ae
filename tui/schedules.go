package tui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/google/uuid"

	"github.com/flowd/flowd/rpc/schedrpc"
)

// Messages of the schedules screen.

// schedulesLoadedMsg answers schedule.list.
type schedulesLoadedMsg struct {
	res *schedrpc.ListResult
	err error
}

// schedulesModel lists schedules with their timing, state and counters.
// schedule.list is refetched when a schedule event arrives (create, fire,
// pause, resume, delete, …), coalesced to one call in flight; the "next"
// and "last" columns age with the clock.
type schedulesModel struct {
	Common
	outbox
	listLoad
	schedules []schedrpc.Schedule
	nav       listNav
}

func newSchedules(c Common) *schedulesModel {
	m := &schedulesModel{Common: c}
	m.listLoad.read = m.fetch
	return m
}

// Title is the screen name.
func (m *schedulesModel) Title() string { return "Schedules" }

func (m *schedulesModel) listHeight() int { return max(m.Height-5, 1) }

// SetSize re-lays out the list.
func (m *schedulesModel) SetSize(w, h int) {
	m.Common.SetSize(w, h)
	m.nav.set(len(m.schedules), m.listHeight())
}

// ShortHelp implements help.KeyMap.
func (m *schedulesModel) ShortHelp() []key.Binding {
	k := m.Keys
	return []key.Binding{k.Up, k.Down, k.SchedPause, k.Trigger, k.Delete, k.Help, k.Quit}
}

// FullHelp implements help.KeyMap.
func (m *schedulesModel) FullHelp() [][]key.Binding {
	k := m.Keys
	return [][]key.Binding{k.nav(), {k.SchedPause, k.Trigger, k.Delete}, k.global()}
}

// Capturing: no text input.
func (m *schedulesModel) Capturing() bool { return false }

// Back never consumes esc.
func (m *schedulesModel) Back() bool { return false }

// fetch reads schedule.list.
func (m *schedulesModel) fetch() tea.Cmd {
	client := m.Client
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.Schedules(cx)
		return schedulesLoadedMsg{res: res, err: err}
	}
}

func (m *schedulesModel) selected() (schedrpc.Schedule, bool) {
	if m.nav.n == 0 {
		return schedrpc.Schedule{}, false
	}
	return m.schedules[m.nav.cursor], true
}

// Update handles keys, loads and events.
func (m *schedulesModel) Update(msg tea.Msg) (*schedulesModel, tea.Cmd) {
	switch msg := msg.(type) {
	case schedulesLoadedMsg:
		m.inflight = false
		if msg.err != nil {
			return m, errorCmd(fmt.Errorf("schedule.list: %w", msg.err))
		}
		sel, _ := m.selected()
		m.schedules, m.loaded = msg.res.Schedules, true
		m.nav.set(len(m.schedules), m.listHeight())
		if i := slices.IndexFunc(m.schedules, func(s schedrpc.Schedule) bool { return s.ID == sel.ID }); i >= 0 {
			m.nav.to(i)
		}
		return m, m.plan()
	case eventsMsg:
		for _, e := range msg.Events {
			if e.Kind == "schedule" {
				m.dirty = true
			}
		}
		if msg.Resync {
			m.dirty = true
		}
		return m, m.plan()
	case resyncMsg:
		m.dirty = true
		return m, m.plan()
	case tea.KeyMsg:
		if m.nav.key(m.Keys, msg) {
			return m, nil
		}
		s, ok := m.selected()
		if !ok || m.ReadOnly {
			return m, nil
		}
		switch {
		case key.Matches(msg, m.Keys.SchedPause):
			return m, schedulePauseCmd(m.Client, s.ID, s.State != "paused")
		case key.Matches(msg, m.Keys.Trigger):
			return m, scheduleTriggerCmd(m.Client, s.ID)
		case key.Matches(msg, m.Keys.Delete):
			m.post(confirmScheduleDelete(m.Common, s))
		}
	}
	return m, nil
}

// The schedule actions. Pause, resume and trigger act at once (each is
// safe to repeat: pause and resume by state, trigger by a run id chosen
// here); delete asks first.

func schedulePauseCmd(client Client, id string, pause bool) tea.Cmd {
	verb := "resume"
	if pause {
		verb = "pause"
	}
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.SchedulePause(cx, id, pause)
		if err != nil {
			return errMsg{fmt.Errorf("%s schedule %s: %w", verb, id, err)}
		}
		if !res.Changed {
			return toastMsg{fmt.Sprintf("schedule %s: already %sd", id, verb)}
		}
		return toastMsg{fmt.Sprintf("schedule %s %sd", id, verb)}
	}
}

func scheduleTriggerCmd(client Client, id string) tea.Cmd {
	runID := uuid.Must(uuid.NewV7()).String() // chosen here: a retried call starts one run
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.ScheduleTrigger(cx, id, runID)
		if err != nil {
			return errMsg{fmt.Errorf("trigger schedule %s: %w", id, err)}
		}
		switch res.Outcome {
		case "started", "":
			return toastMsg{fmt.Sprintf("schedule %s triggered: run %s", id, shortID(res.RunID))}
		}
		return toastMsg{fmt.Sprintf("schedule %s triggered: %s by its overlap policy (a run is still active)", id, res.Outcome)}
	}
}

// confirmScheduleDelete asks before deleting a schedule.
func confirmScheduleDelete(c Common, s schedrpc.Schedule) tea.Msg {
	if c.ReadOnly {
		return nil
	}
	title := fmt.Sprintf("Delete schedule %s?", s.ID)
	body := fmt.Sprintf("schedule %s · %s · %s\n\nIt never fires again; runs it started keep running.", s.ID, scheduleSpec(s), s.State)
	client, id := c.Client, s.ID
	yes := func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.ScheduleDelete(cx, id)
		if err != nil {
			return errMsg{fmt.Errorf("delete schedule %s: %w", id, err)}
		}
		if !res.Changed {
			return toastMsg{fmt.Sprintf("schedule %s was already deleted", id)}
		}
		return toastMsg{fmt.Sprintf("schedule %s deleted", id)}
	}
	return confirmMsg{title: title, body: body, yes: yes}
}

// scheduleSpec is the cron expression or "every <interval>".
func scheduleSpec(s schedrpc.Schedule) string {
	if s.Cron != "" {
		return s.Cron
	}
	return "every " + human(time.Duration(s.IntervalMS)*time.Millisecond)
}

// until is a future time as "in 42s" ("now" once due).
func until(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if !t.After(now) {
		return "due"
	}
	return "in " + human(t.Sub(now))
}

// View renders the summary, the table and the selected schedule's details.
func (m *schedulesModel) View() string {
	st, now := m.Styles, m.Now()
	var b strings.Builder
	if !m.loaded {
		b.WriteString(st.Subtle.Render("loading schedules…"))
	} else {
		paused := 0
		for _, s := range m.schedules {
			if s.State == "paused" {
				paused++
			}
		}
		noun := "schedules"
		if len(m.schedules) == 1 {
			noun = "schedule"
		}
		b.WriteString(st.Subtle.Render(fit(fmt.Sprintf("%d %s · %d paused", len(m.schedules), noun, paused), m.Width)))
	}
	b.WriteByte('\n')
	cols := []column{{Title: "ID", Min: 8, Flex: 2}, {Title: "SPEC", Min: 9, Flex: 2}, {Title: "TZ", Min: 3, Flex: 1},
		{Title: "STATE", Width: 8}, {Title: "NEXT", Width: 9, Right: true}, {Title: "LAST", Width: 9, Right: true},
		{Title: "RUNS", Width: 5, Right: true}, {Title: "MISSED", Width: 6, Right: true}}
	t := newTable(st, cols, m.Width)
	b.WriteString(t.render(m.nav, m.listHeight()+1, "no schedules (create one with flowd schedule create)", func(i int) []string {
		s := &m.schedules[i]
		state := st.Paint("running", "● active")
		if s.State == "paused" {
			state = st.Paint("interrupted", "‖ paused")
		}
		tz := s.TimeZone
		if tz == "" && s.Cron != "" {
			tz = "UTC"
		}
		next := until(now, s.NextFireAt)
		if s.State == "paused" {
			next = "-"
		}
		last := "-"
		if !s.LastFireAt.IsZero() {
			last = strings.TrimSuffix(ago(now, s.LastFireAt), " ago")
		}
		return []string{s.ID, scheduleSpec(*s), dash(tz), state, next, last, utoa(s.Started), utoa(s.Missed)}
	}))
	b.WriteByte('\n')
	b.WriteString(m.detail())
	return fill(b.String(), m.Width, m.Height)
}

// detail shows the selected schedule's workflow, policy and counters.
func (m *schedulesModel) detail() string {
	s, ok := m.selected()
	if !ok {
		return ""
	}
	st, now := m.Styles, m.Now()
	line1 := st.Title.Render("schedule "+s.ID) + " · workflow " + dash(s.Workflow) + " · overlap " + dash(s.Overlap) +
		" · catch-up " + human(time.Duration(s.CatchupWindowMS)*time.Millisecond)
	if s.Note != "" {
		line1 += " · " + s.Note
	}
	line2 := fmt.Sprintf("fires %d · runs %d · skipped %d · missed %d · next %s · last run %s",
		s.Fires, s.Started, s.Skipped, s.Missed, stamp(now, s.NextFireAt), dash(shortID(s.LastRunID)))
	if s.State == "paused" {
		line2 = fmt.Sprintf("fires %d · runs %d · skipped %d · missed %d · paused · last run %s",
			s.Fires, s.Started, s.Skipped, s.Missed, dash(shortID(s.LastRunID)))
	}
	if n := len(s.ActiveRuns); n > 0 {
		line2 += " · " + itoa(n) + " active"
	}
	return fit(line1, m.Width) + "\n" + fit(line2, m.Width)
}
