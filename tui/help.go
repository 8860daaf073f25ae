package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// The help overlay lists every key of the current screen (its FullHelp,
// whose last group is the global keys); disabled bindings (actions under
// --readonly) are left out by bubbles/help.

// helpView renders the overlay box for a screen.
func helpView(c Common, title string, keys help.KeyMap) string {
	st := c.Styles
	hm := help.New()
	hm.ShowAll = true
	hm.FullSeparator = "   "
	hm.Width = max(c.Width-8, 20)
	body := hm.FullHelpView(keys.FullHelp())
	list := ":runs [state] · :run ID · :task RUN/KEY · :queues · :workers · :cluster · :events [filter] · :schedules · :dead\n"
	if !c.ReadOnly {
		list += ":cancel|interrupt|resume|revert|replay ID · :replay ID JSON · :submit FILE [JSON] · "
	}
	// Wrapped to the box: the help stays inside an 80x24 terminal.
	cmds := st.Subtle.Render(ansi.Wordwrap(list+":freeze · :live · :help · :quit", max(c.Width-8, 20), " "))
	text := st.Title.Render("Keys: "+title+" screen") + "\n\n" + body + "\n\n" + st.Title.Render("Commands") + "\n" + cmds +
		"\n\n" + st.Subtle.Render("? or esc closes this help")
	return st.Box.Render(text)
}

// overlay draws box centred over bg (w x h cells), keeping bg around it.
func overlay(bg, box string, w, h int) string {
	bgLines := strings.Split(fill(bg, w, h), "\n")
	boxLines := strings.Split(box, "\n")
	bw := lipgloss.Width(box)
	x0 := max(0, (w-bw)/2)
	y0 := max(0, (h-len(boxLines))/2)
	for i, l := range boxLines {
		y := y0 + i
		if y >= len(bgLines) {
			break
		}
		bgl := bgLines[y]
		line := ansi.Cut(bgl, 0, x0) + pad(l, bw) + ansi.Cut(bgl, x0+bw, w)
		bgLines[y] = fit(line, w)
	}
	return strings.Join(bgLines, "\n")
}

// keysOf adapts binding groups to help.KeyMap.
type keysOf [][]key.Binding

func (k keysOf) ShortHelp() []key.Binding {
	if len(k) == 0 {
		return nil
	}
	return k[0]
}

func (k keysOf) FullHelp() [][]key.Binding { return k }
