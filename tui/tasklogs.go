package tui

import (
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/rpc"
)

// The task screen's Logs pane: the log of one attempt (the latest until
// h/l picks another), refetched when a log or task event for the task
// arrives, kept scrolled to its end unless the user scrolls up.

// logsPane is the pane index of the logs in the task screen.
const logsPane = 2

// attemptKeys pick the attempt whose log the pane shows.
var attemptKeys = key.NewBinding(key.WithKeys("h", "l", "left", "right"), key.WithHelp("h/l", "attempt (logs pane)"))

// taskLogsMsg answers task.logs for one attempt.
type taskLogsMsg struct {
	runID, key string
	attempt    int
	comp       bool
	res        *rpc.TaskLogsResult
	err        error
}

// logView is the state of the Logs pane.
type logView struct {
	sel      int // index into the task's attempts; -1: the latest
	res      *rpc.TaskLogsResult
	scroll   int  // first line shown
	tail     bool // stay at the end as lines arrive
	inflight bool
	dirty    bool
}

func newLogView() logView { return logView{sel: -1, tail: true, dirty: true} }

// selected is the attempt the pane shows (nil when the task has none).
func (m *taskDetail) selectedAttempt() *rpc.Attempt {
	if m.task == nil || len(m.task.Attempts) == 0 {
		return nil
	}
	i := m.logs.sel
	if i < 0 || i >= len(m.task.Attempts) {
		i = len(m.task.Attempts) - 1
	}
	return &m.task.Attempts[i]
}

// fetchLogs reads the selected attempt's log when the pane is open and
// it may have changed.
func (m *taskDetail) fetchLogs() tea.Cmd {
	a := m.selectedAttempt()
	if m.pane != logsPane || !m.active || a == nil || !m.logs.dirty || m.logs.inflight {
		return nil
	}
	m.logs.inflight, m.logs.dirty = true, false
	client, runID, key, n, comp := m.Client, m.runID, m.key, a.N, a.Compensation
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.TaskLogs(cx, rpc.TaskLogsParams{Run: runID, Key: key, Attempt: n, Compensation: comp})
		return taskLogsMsg{runID: runID, key: key, attempt: n, comp: comp, res: res, err: err}
	}
}

// onLogs takes a task.logs answer.
func (m *taskDetail) onLogs(msg taskLogsMsg) tea.Cmd {
	if msg.runID != m.runID || msg.key != m.key {
		return nil
	}
	m.logs.inflight = false
	if msg.err != nil {
		return errorCmd(msg.err)
	}
	if a := m.selectedAttempt(); a != nil && a.N == msg.attempt && a.Compensation == msg.comp {
		m.logs.res = msg.res
	} else {
		m.logs.dirty = true // the selection moved meanwhile
	}
	return m.fetchLogs()
}

// logKey handles a key in the Logs pane.
func (m *taskDetail) logKey(msg tea.KeyMsg) tea.Cmd {
	k, h := m.Keys, m.logHeight()
	switch {
	case key.Matches(msg, attemptKeys) && m.task != nil && len(m.task.Attempts) > 0:
		i := m.logs.sel
		if i < 0 {
			i = len(m.task.Attempts) - 1
		}
		if s := msg.String(); s == "h" || s == "left" {
			i = max(i-1, 0)
		} else {
			i = min(i+1, len(m.task.Attempts)-1)
		}
		if i == len(m.task.Attempts)-1 {
			i = -1 // back to following the latest
		}
		if i != m.logs.sel {
			m.logs.sel, m.logs.res, m.logs.scroll, m.logs.tail, m.logs.dirty = i, nil, 0, true, true
		}
		return m.fetchLogs()
	case key.Matches(msg, k.Down):
		m.logs.scroll++
	case key.Matches(msg, k.Up):
		m.logs.scroll, m.logs.tail = max(0, m.logs.scroll-1), false
	case key.Matches(msg, k.PageDown):
		m.logs.scroll += h
	case key.Matches(msg, k.PageUp):
		m.logs.scroll, m.logs.tail = max(0, m.logs.scroll-h), false
	case key.Matches(msg, k.Top):
		m.logs.scroll, m.logs.tail = 0, false
	case key.Matches(msg, k.Bottom):
		m.logs.tail = true
	}
	return nil
}

func (m *taskDetail) logHeight() int { return max(m.bodyHeight()-1, 1) }

// logLines are the lines of the selected attempt's log.
func (m *taskDetail) logLines() []rpc.LogLine {
	if m.logs.res == nil {
		return nil
	}
	var out []rpc.LogLine
	for _, a := range m.logs.res.Attempts {
		out = append(out, a.Lines...)
	}
	return out
}

// logsView renders the pane below the tab line.
func (m *taskDetail) logsView() string {
	st, w := m.Styles, m.Width
	a := m.selectedAttempt()
	if a == nil {
		return st.Subtle.Render("no attempt yet: the task has not been claimed")
	}
	what := "attempt " + itoa(a.N)
	if a.Compensation {
		what = "revert attempt " + itoa(a.N)
	}
	sel := m.logs.sel
	if sel < 0 {
		sel = len(m.task.Attempts) - 1
	}
	head := st.Title.Render(what) + " (" + itoa(sel+1) + " of " + itoa(len(m.task.Attempts)) + ") · worker " + dash(a.Worker) +
		" · " + st.Paint(outcomeState(a.Outcome), dash(a.Outcome))
	lines := m.logLines()
	if r := m.logs.res; r != nil && len(r.Attempts) == 1 {
		ra := r.Attempts[0]
		head += " · " + itoa(ra.LinesStored) + " lines, " + human64(ra.Bytes)
		if d := ra.LinesTotal - ra.LinesStored; d > 0 {
			head += " · " + itoa(d) + " dropped"
		}
	}
	if m.logs.sel < 0 {
		head += st.Subtle.Render(" · live")
	}
	out := []string{fit(head, w)}
	h := m.logHeight()
	if len(lines) == 0 {
		msg := "no log lines"
		if m.logs.res == nil {
			msg = "loading the log…"
		}
		return strings.Join(append(out, st.Subtle.Render(msg)), "\n")
	}
	if m.logs.tail {
		m.logs.scroll = len(lines) - h
	}
	m.logs.scroll = max(0, min(m.logs.scroll, len(lines)-h))
	if m.logs.scroll == len(lines)-h || len(lines) <= h {
		m.logs.tail = true
	}
	for _, l := range lines[m.logs.scroll:min(len(lines), m.logs.scroll+h)] {
		stream := pad(l.Stream, 6)
		switch l.Stream {
		case rpc.StreamStderr:
			stream = st.Error.Render(stream)
		case rpc.StreamFlowd:
			stream = st.Subtle.Render(stream)
		default:
			stream = st.Subtle.Render(stream)
		}
		ts := time.UnixMilli(l.At).UTC().Format("15:04:05.000")
		out = append(out, fit(st.Subtle.Render(ts)+" "+stream+" "+strings.ReplaceAll(l.Line, "\t", "    "), w))
	}
	return strings.Join(out, "\n")
}

// human64 renders a byte count: "812 B", "12.3 KiB".
func human64(n int) string {
	if n < 1024 {
		return itoa(n) + " B"
	}
	return strings.TrimSuffix(strings.TrimSuffix(ftoa(float64(n)/1024), "0"), ".") + " KiB"
}

func ftoa(f float64) string {
	s := itoa(int(f*10 + 0.5))
	if len(s) == 1 {
		s = "0" + s
	}
	return s[:len(s)-1] + "." + s[len(s)-1:]
}
