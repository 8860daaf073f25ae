package tui

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/rpc"
)

// Messages of the task detail screen.

// taskLoadedMsg answers task.get (with the run, for the dependencies).
type taskLoadedMsg struct {
	runID, key string
	task       *rpc.Task
	run        *rpc.Run
	err        error
}

// taskDetail shows one task: lease and fencing token, every attempt, the
// dependencies with their results, compensation; a JSON pane holds input,
// result, error and the dependencies' results.
type taskDetail struct {
	Common
	outbox
	active     bool
	runID, key string
	task       *rpc.Task
	run        *rpc.Run
	pane       int // 0 overview, 1 JSON, 2 logs
	logs       logView
	scroll     int
	json       *jsonView
	payload    lineInput // the approve payload (approve.go)
	inflight   bool
	dirty      bool
}

func newTaskDetail(c Common) *taskDetail {
	return &taskDetail{Common: c, json: newJSONView(c), logs: newLogView()}
}

// Title is the screen name.
func (m *taskDetail) Title() string { return "Task" }

// open switches to a task and loads it.
func (m *taskDetail) open(runID, key string) tea.Cmd {
	if runID != m.runID || key != m.key {
		m.runID, m.key, m.task, m.run, m.scroll, m.pane = runID, key, nil, nil, 0, 0
		m.logs = newLogView()
		m.payload.stop()
		m.json.root = nil
		m.json.relayout()
		m.inflight = false
	}
	return m.fetch()
}

func (m *taskDetail) bodyHeight() int { return max(m.Height-1, 1) }

// SetSize re-lays out the panes.
func (m *taskDetail) SetSize(w, h int) {
	m.Common.SetSize(w, h)
	m.json.SetSize(w, m.bodyHeight())
}

// ShortHelp implements help.KeyMap.
func (m *taskDetail) ShortHelp() []key.Binding {
	k := m.Keys
	return []key.Binding{k.NextPane, k.Up, k.Down, k.Back, k.Help}
}

// FullHelp implements help.KeyMap.
func (m *taskDetail) FullHelp() [][]key.Binding {
	k := m.Keys
	return [][]key.Binding{k.nav(), {k.NextPane, k.PrevPane, attemptKeys, k.Fold, k.ExpandAll, k.CollapseAll, k.Approve}, k.global()}
}

// Capturing: the approve payload editor has the keys.
func (m *taskDetail) Capturing() bool { return m.payload.active }

// Back never consumes esc.
func (m *taskDetail) Back() bool { return false }

// Focus refetches if the task changed while hidden.
func (m *taskDetail) Focus() tea.Cmd {
	m.active = true
	return tea.Batch(m.plan(), m.fetchLogs())
}

// Blur is called when the screen is hidden.
func (m *taskDetail) Blur() { m.active = false }

func (m *taskDetail) fetch() tea.Cmd {
	if m.runID == "" {
		return nil
	}
	m.inflight, m.dirty = true, false
	client, runID, key := m.Client, m.runID, m.key
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		t, err := client.TaskGet(cx, runID+"/"+key)
		if err != nil {
			return taskLoadedMsg{runID: runID, key: key, err: err}
		}
		r, err := client.RunGet(cx, runID)
		return taskLoadedMsg{runID: runID, key: key, task: t, run: r, err: err}
	}
}

func (m *taskDetail) plan() tea.Cmd {
	if m.active && m.dirty && !m.inflight {
		return m.fetch()
	}
	return nil
}

// Update handles keys, loads and events.
func (m *taskDetail) Update(msg tea.Msg) (*taskDetail, tea.Cmd) {
	switch msg := msg.(type) {
	case taskLoadedMsg:
		if msg.runID != m.runID || msg.key != m.key {
			return m, nil
		}
		m.inflight = false
		if msg.err != nil {
			return m, errorCmd(msg.err)
		}
		m.task, m.run = msg.task, msg.run
		m.json.SetFields(m.document())
		return m, tea.Batch(m.plan(), m.fetchLogs())
	case taskLogsMsg:
		return m, m.onLogs(msg)
	case eventsMsg:
		rid := m.runID // opened by :task, it may be a short id
		if m.task != nil {
			rid = m.task.RunID
		}
		for _, e := range msg.Events {
			if e.RunID == rid && (e.TaskKey == m.key || e.Kind == "run" || (m.task != nil && slices.Contains(m.task.Deps, e.TaskKey))) {
				m.dirty = true
			}
			if e.RunID == rid && e.TaskKey == m.key {
				m.logs.dirty = true
			}
		}
		if msg.Resync {
			m.dirty, m.logs.dirty = true, true
		}
		return m, tea.Batch(m.plan(), m.fetchLogs())
	case resyncMsg:
		m.dirty = true
		return m, m.plan()
	case tea.KeyMsg:
		k := m.Keys
		switch {
		case m.payload.active:
			return m, m.payloadKey(msg)
		case key.Matches(msg, k.Approve):
			return m, m.startApprove()
		case key.Matches(msg, k.NextPane):
			m.pane = (m.pane + 1) % 3
			return m, m.fetchLogs()
		case key.Matches(msg, k.PrevPane):
			m.pane = (m.pane + 2) % 3
			return m, m.fetchLogs()
		case m.pane == logsPane:
			return m, m.logKey(msg)
		case m.pane == 1:
			m.json, _ = m.json.Update(msg)
		case key.Matches(msg, k.Down):
			m.scroll++
		case key.Matches(msg, k.Up):
			m.scroll = max(0, m.scroll-1)
		case key.Matches(msg, k.PageDown):
			m.scroll += m.bodyHeight()
		case key.Matches(msg, k.PageUp):
			m.scroll = max(0, m.scroll-m.bodyHeight())
		case key.Matches(msg, k.Top):
			m.scroll = 0
		case key.Matches(msg, k.Bottom):
			m.scroll = 1 << 20
		}
	}
	return m, nil
}

func (m *taskDetail) document() []jsonField {
	t := m.task
	fields := []jsonField{{Name: "input", Raw: t.Input}, {Name: "result", Raw: t.Result}}
	if t.Error != "" {
		fields = append(fields, jsonField{Name: "error", Text: t.Error})
	}
	if c := t.Compensation; c != nil && c.Error != "" {
		fields = append(fields, jsonField{Name: "compensation_error", Text: c.Error})
	}
	if m.run != nil && len(t.Deps) > 0 {
		fields = append(fields, jsonField{Name: "dependencies", Raw: orderedObject(t.Deps, func(k string) json.RawMessage {
			if d := findTask(m.run, k); d != nil && len(d.Result) > 0 {
				return d.Result
			}
			return json.RawMessage("null")
		})})
	}
	return fields
}

func findTask(r *rpc.Run, key string) *rpc.Task {
	for i := range r.Tasks {
		if r.Tasks[i].Key == key {
			return &r.Tasks[i]
		}
	}
	return nil
}

// leaseLeft is the time left on a task's lease.
func leaseLeft(now time.Time, t *rpc.Task) string {
	if t.LeaseExpiresAt.IsZero() || t.LeaseOwner == "" {
		return "-"
	}
	d := t.LeaseExpiresAt.Sub(now)
	if d <= 0 {
		return "expired"
	}
	return human(d)
}

// View renders the overview or the JSON pane.
func (m *taskDetail) View() string {
	st := m.Styles
	if m.task == nil {
		msg := "loading task " + shortID(m.runID) + "/" + m.key + "…"
		if m.runID == "" {
			msg = "no task selected: open one from a run (enter on a task) or with :task RUN/KEY"
		}
		return fill(st.Subtle.Render(msg), m.Width, m.Height)
	}
	tabs := []string{" Overview ", " JSON ", " Logs "}
	tabs[m.pane] = st.NavActive.Render("[" + strings.TrimSpace(tabs[m.pane]) + "]")
	head := strings.Join(tabs, " ") + st.Subtle.Render("   tab switches pane")
	if m.payload.active {
		head = fit(m.payload.View(st), m.Width)
	}
	if m.pane == 1 {
		return fill(head+"\n"+m.json.View(), m.Width, m.Height)
	}
	if m.pane == logsPane {
		return fill(head+"\n"+m.logsView(), m.Width, m.Height)
	}
	lines := m.overview()
	h := m.bodyHeight()
	m.scroll = max(0, min(m.scroll, len(lines)-h))
	lines = lines[m.scroll:min(len(lines), m.scroll+h)]
	return fill(head+"\n"+strings.Join(lines, "\n"), m.Width, m.Height)
}

func (m *taskDetail) overview() []string {
	st, t, now, w := m.Styles, m.task, m.Now(), m.Width
	wf := ""
	if m.run != nil {
		wf = " (" + m.run.Workflow + ")"
	}
	attempt := itoa(t.Attempt) + "/" + itoa(t.MaxAttempts)
	lines := []string{
		st.Title.Render("Task "+t.Key) + " of run " + shortID(t.RunID) + wf + "  " + st.State(string(t.State)),
		"type " + t.Type + " · queue " + t.Queue + " · priority " + itoa(int(t.Priority)) + " · attempt " + attempt +
			" · spawned by " + dash(t.SpawnedBy) + " · revert type " + dash(t.RevertType),
	}
	if t.LeaseOwner != "" {
		lines = append(lines, "lease: worker "+t.LeaseOwner+" · fencing token "+utoa(t.FencingToken)+
			" · expires "+clock(t.LeaseExpiresAt)+" ("+leaseLeft(now, t)+" left)")
	} else {
		lines = append(lines, "lease: none · fencing token "+utoa(t.FencingToken)+" (last claim)")
	}
	lines = append(lines, "ready "+stamp(now, t.ReadyAt)+" · started "+stamp(now, t.StartedAt)+" · finished "+
		stamp(now, t.FinishedAt)+" · retry at "+clock(t.RetryAt)+" · took "+span(now, t.StartedAt, t.FinishedAt))
	if c := t.Compensation; c != nil {
		lines = append(lines, "compensation: phase "+c.Phase+" · attempt "+itoa(c.Attempt)+" · retry at "+clock(c.RetryAt)+
			" · error "+dash(oneLine(c.Error, 80)))
	} else {
		lines = append(lines, "compensation: none")
	}
	if approvable(t) {
		sig := ""
		if t.Signal != "" {
			sig = " (signal " + t.Signal + ")"
		}
		hint := ""
		if !m.ReadOnly {
			hint = " · a approves"
		}
		until := ""
		if !t.DeadlineAt.IsZero() {
			until = " · until " + clock(t.DeadlineAt)
		}
		lines = append(lines, st.Warn.Render("waiting for a signal"+sig+until+hint))
	}
	if t.Reused {
		lines = append(lines, st.Subtle.Render("result reused from the replayed run"))
	}
	if t.Error != "" {
		lines = append(lines, st.Error.Render("error: "+oneLine(t.Error, w-8)))
	}
	lines = append(lines, "", st.Title.Render("Attempts"))
	at := newTable(st, []column{{Title: "#", Width: 3, Right: true}, {Title: "WORKER", Min: 10, Flex: 1},
		{Title: "TOKEN", Width: 8, Right: true}, {Title: "CLAIMED", Width: 8}, {Title: "ENDED", Width: 8},
		{Title: "TOOK", Width: 8, Right: true}, {Title: "OUTCOME", Width: 12}, {Title: "ERROR", Min: 10, Flex: 3}}, w)
	lines = append(lines, at.header())
	for _, a := range t.Attempts {
		n := itoa(a.N)
		if a.Compensation {
			n += "↺"
		}
		lines = append(lines, at.row([]string{n, a.Worker, utoa(a.FencingToken), clock(a.ClaimedAt), clock(a.EndedAt),
			span(now, a.ClaimedAt, a.EndedAt), st.Paint(outcomeState(a.Outcome), dash(a.Outcome)), oneLine(a.Error, 200)}, false))
	}
	if len(t.Attempts) == 0 {
		lines = append(lines, "  "+st.Subtle.Render("never claimed"))
	}
	lines = append(lines, "", st.Title.Render("Dependencies"))
	dt := newTable(st, []column{{Title: "KEY", Min: 10, Flex: 1}, {Title: "STATE", Width: 11},
		{Title: "RESULT", Min: 10, Flex: 4}}, w)
	lines = append(lines, dt.header())
	for _, k := range t.Deps {
		state, result := "", ""
		if m.run != nil {
			if d := findTask(m.run, k); d != nil {
				state, result = string(d.State), oneLine(string(d.Result), 300)
			}
		}
		lines = append(lines, dt.row([]string{k, st.State(state), result}, false))
	}
	if len(t.Deps) == 0 {
		lines = append(lines, "  "+st.Subtle.Render("none: a root task"))
	}
	for i := range lines {
		lines[i] = fit(lines[i], w)
	}
	return lines
}

// outcomeState colours an attempt outcome like the state it led to.
func outcomeState(o string) string {
	switch o {
	case "succeeded", "running", "failed", "cancelled":
		return o
	case "lease_expired":
		return "retrying"
	case "revoked":
		return "reverting"
	}
	return "pending"
}
