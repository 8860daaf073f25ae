package tui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// The dead-letter screen (9): the failed tasks of every run, newest run
// first, as task.list with state failed answers them (asynqmon's
// "archived" tab). `r` retries the selected task's run in place
// (run.retry with the task: the task, and what its failure left
// cancelled or skipped, go back to ready in the same run); `A` retries
// every failed run of the selected task's workflow, behind a confirm
// dialog. task.list is refetched when an event moves a task or a run into
// or out of failed, coalesced to one call in flight.

// Messages of the dead-letter screen.

// deadLoadedMsg answers task.list (state failed) and run.list (the failed
// runs, for their workflows).
type deadLoadedMsg struct {
	tasks     []rpc.Task
	workflows map[string]string // run id -> workflow, for the failed runs
	more      bool              // more failed tasks than maxDead
	err       error
}

// deadRetriedMsg reports a retry from this screen: a notice, or an error.
type deadRetriedMsg struct {
	text string
	err  error
}

// maxDead bounds the failed tasks the screen loads (task.list pages).
const maxDead = 1000

// deadModel lists failed tasks across runs.
type deadModel struct {
	Common
	outbox
	listLoad
	tasks     []rpc.Task
	workflows map[string]string
	more      bool
	nav       listNav
}

func newDead(c Common) *deadModel {
	m := &deadModel{Common: c}
	m.listLoad.read = m.fetch
	return m
}

// Title is the screen name.
func (m *deadModel) Title() string { return "Failed tasks" }

func (m *deadModel) listHeight() int { return max(m.Height-4, 1) }

// SetSize re-lays out the list.
func (m *deadModel) SetSize(w, h int) {
	m.Common.SetSize(w, h)
	m.nav.set(len(m.tasks), m.listHeight())
}

// ShortHelp implements help.KeyMap.
func (m *deadModel) ShortHelp() []key.Binding {
	k := m.Keys
	return []key.Binding{k.Open, k.RetryTask, k.RetryFailed, k.Help, k.Quit}
}

// FullHelp implements help.KeyMap.
func (m *deadModel) FullHelp() [][]key.Binding {
	k := m.Keys
	return [][]key.Binding{k.nav(), {k.Open, k.RetryTask, k.RetryFailed}, k.global()}
}

// Capturing: no text input.
func (m *deadModel) Capturing() bool { return false }

// Back never consumes esc.
func (m *deadModel) Back() bool { return false }

// fetch pages task.list (state failed) up to maxDead tasks, and reads the
// failed runs' workflows.
func (m *deadModel) fetch() tea.Cmd {
	client := m.Client
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		var out deadLoadedMsg
		p := rpc.TaskListParams{State: domain.TaskFailed, Limit: maxDead}
		for range 20 { // a page may be short and still have a cursor
			res, err := client.TaskList(cx, p)
			if err != nil {
				return deadLoadedMsg{err: fmt.Errorf("task.list: %w", err)}
			}
			out.tasks = append(out.tasks, res.Tasks...)
			if res.NextCursor == "" {
				break
			}
			if len(out.tasks) >= maxDead {
				out.more = true
				break
			}
			p.Cursor, p.Limit = res.NextCursor, maxDead-len(out.tasks)
		}
		out.workflows = map[string]string{}
		runs, err := client.RunList(cx, rpc.ListParams{State: domain.RunFailed, Limit: 1000})
		if err != nil {
			return deadLoadedMsg{err: fmt.Errorf("run.list: %w", err)}
		}
		for _, r := range runs.Runs {
			out.workflows[r.ID] = r.Workflow
		}
		return out
	}
}

func (m *deadModel) selected() (rpc.Task, bool) {
	if m.nav.n == 0 {
		return rpc.Task{}, false
	}
	return m.tasks[m.nav.cursor], true
}

// touchesFailed reports whether an event moves a task or a run into or
// out of failed.
func touchesFailed(e rpc.Event) bool {
	return (e.Kind == "task" || e.Kind == "run") && (e.To == "failed" || e.From == "failed")
}

// Update handles keys, loads and events.
func (m *deadModel) Update(msg tea.Msg) (*deadModel, tea.Cmd) {
	switch msg := msg.(type) {
	case deadLoadedMsg:
		m.inflight = false
		if msg.err != nil {
			return m, errorCmd(msg.err)
		}
		sel, _ := m.selected()
		m.tasks, m.workflows, m.more, m.loaded = msg.tasks, msg.workflows, msg.more, true
		m.nav.set(len(m.tasks), m.listHeight())
		if i := slices.IndexFunc(m.tasks, func(t rpc.Task) bool { return t.ID == sel.ID }); i >= 0 {
			m.nav.to(i)
		}
		return m, m.plan()
	case deadRetriedMsg:
		m.dirty = true // the stream says so too; do not wait for it
		if msg.err != nil {
			return m, tea.Batch(m.plan(), errorCmd(msg.err))
		}
		return m, tea.Batch(m.plan(), toastCmd(msg.text))
	case eventsMsg:
		for _, e := range msg.Events {
			if touchesFailed(e) {
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
		t, ok := m.selected()
		if !ok {
			return m, nil
		}
		switch {
		case key.Matches(msg, m.Keys.Open):
			m.post(openTaskMsg{runID: t.RunID, key: t.Key})
		case m.ReadOnly:
		case key.Matches(msg, m.Keys.RetryTask):
			return m, retryTaskCmd(m.Client, t.RunID, t.Key)
		case key.Matches(msg, m.Keys.RetryFailed):
			return m, confirmRetryWorkflow(m.Common, t.RunID, m.workflows[t.RunID])
		}
	}
	return m, nil
}

// retryTaskCmd retries run id in place from task key. It acts at once,
// as a one-key retry should: a second press is refused by the agent (the
// run is active again), never applied twice.
func retryTaskCmd(client Client, id, key string) tea.Cmd {
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.RunRetry(cx, rpc.RetryParams{ID: id, Task: key})
		if err != nil {
			return deadRetriedMsg{err: fmt.Errorf("retry %s/%s: %w", shortID(id), key, err)}
		}
		return deadRetriedMsg{text: fmt.Sprintf("run %s retried in place: %s again, now %s",
			shortID(res.ID), dash(strings.Join(res.Tasks, ", ")), stateLabel(string(res.State)))}
	}
}

// confirmRetryWorkflow finds every failed run of the workflow of run id
// (wf when already known) and asks to retry them all in place.
func confirmRetryWorkflow(c Common, id, wf string) tea.Cmd {
	client := c.Client
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		if wf == "" {
			r, err := client.RunGet(cx, id)
			if err != nil {
				return errMsg{fmt.Errorf("retry the failed runs of run %s's workflow: %w", shortID(id), err)}
			}
			wf = r.Workflow
		}
		if wf == "" {
			return errMsg{fmt.Errorf("run %s has no workflow name to retry by: retry it alone with r", shortID(id))}
		}
		var ids []string
		p := rpc.ListParams{State: domain.RunFailed, Workflow: wf, Limit: 1000}
		for {
			res, err := client.RunList(cx, p)
			if err != nil {
				return errMsg{fmt.Errorf("list the failed runs of %s: %w", wf, err)}
			}
			for _, r := range res.Runs {
				ids = append(ids, r.ID)
			}
			if res.NextCursor == "" {
				break
			}
			p.Cursor = res.NextCursor
		}
		if len(ids) == 0 {
			return errMsg{fmt.Errorf("workflow %s has no failed run (a cancelled run is retried alone with r)", wf)}
		}
		named := make([]string, 0, maxBulkNamed)
		for _, id := range ids[:min(len(ids), maxBulkNamed)] {
			named = append(named, shortID(id))
		}
		body := strings.Join(named, " ")
		if len(ids) > maxBulkNamed {
			body += fmt.Sprintf(" and %d more", len(ids)-maxBulkNamed)
		}
		body += "\n\nEach run's failed and cancelled tasks go back to ready in the same run (run.retry); " +
			"tasks that succeeded keep their results."
		return confirmMsg{title: fmt.Sprintf("Retry %d failed %s of workflow %s?", len(ids), plural(len(ids), "run", "runs"), wf),
			body: body, yes: retryRunsCmd(client, wf, ids)}
	}
}

// retryRunsCmd retries every run of ids in place, one call at a time,
// and sums up.
func retryRunsCmd(client Client, wf string, ids []string) tea.Cmd {
	return func() tea.Msg {
		ok, refused := 0, 0
		var first error
		for _, id := range ids {
			cx, cancel := ctx()
			_, err := client.RunRetry(cx, rpc.RetryParams{ID: id})
			cancel()
			if err != nil {
				refused++
				if first == nil {
					first = fmt.Errorf("retry %s: %w", shortID(id), err)
				}
				continue
			}
			ok++
		}
		text := fmt.Sprintf("workflow %s: %d failed %s retried in place", wf, ok, plural(ok, "run", "runs"))
		if refused > 0 {
			return deadRetriedMsg{err: fmt.Errorf("%s, %d refused; the first: %w", text, refused, first)}
		}
		return deadRetriedMsg{text: text}
	}
}

// View renders the summary, the table and the selected task's error.
func (m *deadModel) View() string {
	st, now := m.Styles, m.Now()
	var b strings.Builder
	if !m.loaded {
		b.WriteString(st.Subtle.Render("loading failed tasks…"))
	} else {
		runs := map[string]bool{}
		for _, t := range m.tasks {
			runs[t.RunID] = true
		}
		s := fmt.Sprintf("%d failed %s in %d %s, newest run first", len(m.tasks), plural(len(m.tasks), "task", "tasks"),
			len(runs), plural(len(runs), "run", "runs"))
		if m.more {
			s += fmt.Sprintf(" (the first %d)", maxDead)
		}
		if hint := " · r retries the task's run in place · A every failed run of its workflow"; !m.ReadOnly && width(s+hint) <= m.Width {
			s += hint
		}
		b.WriteString(st.Subtle.Render(fit(s, m.Width)))
	}
	b.WriteByte('\n')
	cols := []column{{Title: "RUN", Width: 12}, {Title: "WORKFLOW", Min: 8, Flex: 1, Drop: 3},
		{Title: "TASK", Min: 10, Flex: 2}, {Title: "TYPE", Min: 6, Flex: 1, Drop: 4}, {Title: "QUEUE", Min: 7, Flex: 1, Drop: 5},
		{Title: "ATTEMPT", Width: 7, Right: true, Drop: 2}, {Title: "FAILED", Width: 10, Right: true},
		{Title: "ERROR", Min: 12, Flex: 3, Drop: 1}}
	t := newTable(st, cols, m.Width)
	b.WriteString(t.render(m.nav, m.listHeight()+1, "no failed tasks", func(i int) []string {
		tk := &m.tasks[i]
		return []string{shortID(tk.RunID), dash(m.workflows[tk.RunID]), tk.Key, tk.Type, tk.Queue,
			itoa(tk.Attempt) + "/" + itoa(tk.MaxAttempts), ago(now, tk.FinishedAt), oneLine(tk.Error, 200)}
	}))
	b.WriteByte('\n')
	b.WriteString(m.detail())
	return fill(b.String(), m.Width, m.Height)
}

// detail names the selected task in full and its whole error.
func (m *deadModel) detail() string {
	t, ok := m.selected()
	if !ok {
		return ""
	}
	st := m.Styles
	line1 := st.Title.Render("task "+t.Key) + " of run " + t.RunID + " · workflow " + dash(m.workflows[t.RunID]) +
		" · finished " + stamp(m.Now(), t.FinishedAt)
	line2 := st.Error.Render("error: " + dash(oneLine(t.Error, 4*m.Width)))
	return fit(line1, m.Width) + "\n" + fit(line2, m.Width)
}
