package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// confirmMsg asks the root to open a confirm dialog; yes runs on "Yes".
// defaultYes focuses "Yes" first: only for an action the user has just
// spelled out in full (`:submit FILE`, `:replay ID JSON`, the input editor's
// ctrl+s) that creates a new run and cannot run twice (its id is chosen
// when the dialog opens). The enter that follows is then the expected
// "go"; everything that stops, reverts or deletes keeps "No" first.
type confirmMsg struct {
	title, body string
	yes         tea.Cmd
	defaultYes  bool
}

// dialog is a yes/no confirmation. "No" is focused first (unless the
// request says defaultYes), so a stray enter never fires an action that
// stops, reverts or deletes; `y` confirms directly, `n` or esc declines.
type dialog struct {
	Common
	req      confirmMsg
	focusYes bool
	// closed is set when the user chose; chosen is the action (nil: no).
	// The root reads both right after Update, so the next key already goes
	// to the screen below.
	closed bool
	chosen tea.Cmd
}

type dialogKeys struct{ yes, no, toggle, choose key.Binding }

var dkeys = dialogKeys{
	yes:    key.NewBinding(key.WithKeys("y", "Y"), key.WithHelp("y", "yes")),
	no:     key.NewBinding(key.WithKeys("n", "N", "esc", "q"), key.WithHelp("n/esc", "no")),
	toggle: key.NewBinding(key.WithKeys("left", "right", "h", "l", "tab", "shift+tab"), key.WithHelp("←/→", "switch")),
	choose: key.NewBinding(key.WithKeys("enter", " "), key.WithHelp("enter", "choose")),
}

func newDialog(c Common, req confirmMsg) *dialog {
	return &dialog{Common: c, req: req, focusYes: req.defaultYes}
}

// ShortHelp implements help.KeyMap.
func (d *dialog) ShortHelp() []key.Binding {
	return []key.Binding{dkeys.yes, dkeys.no, dkeys.toggle, dkeys.choose}
}

// FullHelp implements help.KeyMap.
func (d *dialog) FullHelp() [][]key.Binding { return [][]key.Binding{d.ShortHelp()} }

// Update handles the dialog's keys.
func (d *dialog) Update(msg tea.Msg) (*dialog, tea.Cmd) {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		return d, nil
	}
	done := func(c tea.Cmd) tea.Cmd {
		d.closed, d.chosen = true, c
		return nil
	}
	switch {
	case key.Matches(k, dkeys.yes):
		return d, done(d.req.yes)
	case key.Matches(k, dkeys.no):
		return d, done(nil)
	case key.Matches(k, dkeys.toggle):
		d.focusYes = !d.focusYes
	case key.Matches(k, dkeys.choose):
		if d.focusYes {
			return d, done(d.req.yes)
		}
		return d, done(nil)
	}
	return d, nil
}

// View renders the dialog box; the focused button carries the cursor.
func (d *dialog) View() string {
	st := d.Styles
	w := min(64, max(d.Width-4, 20))
	btn := func(label string, focused bool) string {
		if focused {
			return st.Selected.Render(st.Cursor + "[ " + label + " ]")
		}
		return " [ " + label + " ]"
	}
	buttons := btn("Yes", d.focusYes) + "   " + btn("No", !d.focusYes)
	body := lipgloss.NewStyle().Width(w - 4).Render(d.req.body)
	lines := []string{st.Title.Render(d.req.title), "", body, "", lipgloss.PlaceHorizontal(w-4, lipgloss.Center, buttons),
		st.Subtle.Render(lipgloss.PlaceHorizontal(w-4, lipgloss.Center, "y yes · n/esc no · ←/→ switch · enter choose"))}
	return st.Box.Width(w).Render(strings.Join(lines, "\n"))
}
