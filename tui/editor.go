package tui

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textarea"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// The input editor: a multi-line JSON editor (bubbles textarea) in a box
// over the screen, for the input of a replay (`e`) or a submit
// (`:submit FILE` without an inline input). enter inserts a new line, so
// a pretty-printed input edits like a file; ctrl+s checks the JSON and
// goes on to the usual confirm dialog; esc closes it. The cursor never
// blinks (frames stay deterministic).

// editorMsg asks the root to open the input editor with text.
type editorMsg struct {
	title, about string
	text         string
	// allowEmpty: an empty text means no input (a submit); otherwise the
	// editor asks for JSON.
	allowEmpty bool
	// next is what ctrl+s does with the compacted input (nil: none).
	next func(json.RawMessage) tea.Cmd
}

type editorKeys struct{ save, cancel, newline key.Binding }

var ekeys = editorKeys{
	save:    key.NewBinding(key.WithKeys("ctrl+s"), key.WithHelp("ctrl+s", "continue")),
	cancel:  key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
	newline: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "new line")),
}

// editor is the open input editor; like dialog, the root reads closed and
// chosen right after Update.
type editor struct {
	Common
	req    editorMsg
	ta     textarea.Model
	err    string
	closed bool
	chosen tea.Cmd
}

func newEditor(c Common, req editorMsg) *editor {
	ta := textarea.New()
	ta.ShowLineNumbers = true
	ta.Placeholder = "JSON"
	if req.allowEmpty {
		ta.Placeholder = "JSON input, or empty for none"
	}
	ta.CharLimit = 1 << 20 // the agent's input limit
	ta.FocusedStyle.CursorLine = lipgloss.NewStyle()
	ta.Cursor.SetMode(cursor.CursorStatic)
	ta.Focus()
	ta.SetValue(req.text)
	e := &editor{Common: c, req: req, ta: ta}
	// The cursor's line is marked in the margin: a reverse-video cursor
	// vanishes under NO_COLOR (the hint row also gives line and column).
	bar := "│ "
	if c.Styles.ASCII {
		bar = "| "
	}
	e.ta.SetPromptFunc(2, func(line int) string {
		if line == e.ta.Line() {
			return c.Styles.Cursor + " "
		}
		return bar
	})
	e.SetSize(c.Width, c.Height)
	return e
}

// boxWidth is the editor box's width at the terminal's width.
func (e *editor) boxWidth() int { return min(76, max(e.Width-4, 24)) }

// SetSize fits the text area into the box.
func (e *editor) SetSize(w, h int) {
	e.Common.SetSize(w, h)
	e.ta.SetWidth(e.boxWidth() - 4)
	e.fitHeight()
}

// fitHeight sizes the text area to its text plus a free row, from 5 rows
// up to what the terminal leaves (12 at 80x24, at most 24).
func (e *editor) fitHeight() {
	most := max(min(e.Height-12, 24), 3)
	e.ta.SetHeight(min(max(e.ta.LineCount()+1, 5), most))
}

// ShortHelp implements help.KeyMap.
func (e *editor) ShortHelp() []key.Binding {
	return []key.Binding{ekeys.save, ekeys.cancel, ekeys.newline}
}

// FullHelp implements help.KeyMap.
func (e *editor) FullHelp() [][]key.Binding { return [][]key.Binding{e.ShortHelp()} }

// Update edits the text; ctrl+s and esc close the editor.
func (e *editor) Update(msg tea.Msg) (*editor, tea.Cmd) {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		return e, nil
	}
	switch {
	case key.Matches(k, ekeys.cancel):
		e.closed = true
		return e, nil
	case key.Matches(k, ekeys.save):
		in, err := e.input()
		if err != "" {
			e.err = err
			return e, nil
		}
		e.closed, e.chosen = true, e.req.next(in)
		return e, nil
	}
	e.err = ""
	var cmd tea.Cmd
	e.ta, cmd = e.ta.Update(k)
	e.fitHeight()
	return e, cmd
}

// input is the text as compact JSON (nil when empty and allowed), or what
// is wrong with it.
func (e *editor) input() (json.RawMessage, string) {
	text := strings.TrimSpace(e.ta.Value())
	if text == "" {
		if e.req.allowEmpty {
			return nil, ""
		}
		return nil, "the input is empty: give JSON ({} for an empty object)"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		return nil, "not valid JSON: " + err.Error() + " (fix it, or esc to cancel)"
	}
	return b.Bytes(), ""
}

// View renders the box: title, what it is for, the text area, an error.
func (e *editor) View() string {
	st := e.Styles
	w := e.boxWidth()
	lines := []string{st.Title.Render(e.req.title)}
	if e.req.about != "" {
		lines = append(lines, lipgloss.NewStyle().Width(w-4).Render(e.req.about))
	}
	lines = append(lines, "", e.ta.View(), "")
	if e.err != "" {
		lines = append(lines, st.Error.Render(fit(e.err, w-4)))
	} else {
		pos := "ln " + itoa(e.ta.Line()+1) + " col " + itoa(e.ta.LineInfo().ColumnOffset+1)
		lines = append(lines, st.Subtle.Render(fit(pos+" · ctrl+s continue · esc cancel · enter new line", w-4)))
	}
	return st.Box.Width(w).Render(strings.Join(lines, "\n"))
}

// prettyJSON indents a JSON value for editing ("" for none).
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
