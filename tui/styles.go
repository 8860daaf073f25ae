package tui

import (
	"github.com/flowd/flowd/internal/display"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// State glyphs and labels are shared with the CLI (internal/display):
// every state is shown as glyph + word, readable without colour.
var (
	stateGlyph = display.Glyph
	stateLabel = display.Label
)

// stateColor is the ANSI colour of a state (the CLI's palette).
func stateColor(state string) lipgloss.Color {
	switch state {
	case "succeeded", "closed", "leader", "live":
		return "2"
	case "failed", "open", "unreachable":
		return "1"
	case "running", "ready", "follower":
		return "6"
	case "retrying", "interrupted", "half-open", "half_open", "candidate":
		return "3"
	case "reverting", "reverted":
		return "5"
	}
	return "8"
}

// Styles holds every style and drawing character. Colour is never the only
// signal: the cursor is the `›` glyph, states carry glyphs, the active tab
// is bracketed, stale data carries a banner.
type Styles struct {
	ASCII bool

	Header, HeaderDim, Rule, NavActive, Nav       lipgloss.Style
	Footer, Error, Toast, Title, Subtle, Key, Bad lipgloss.Style
	Good, Warn, Selected, ColHeader, Dim, Box     lipgloss.Style
	JSONKey, JSONString, JSONNumber, JSONLiteral  lipgloss.Style

	// Drawing characters.
	Cursor, BarFull, BarEmpty, RuleChar, FoldOpen, FoldClosed string
	Mark                                                      string // a row marked for a bulk action
	Spark                                                     []string
	Border                                                    lipgloss.Border

	states map[string]lipgloss.Style
	memo   map[string]string // rendered states and bars
}

// NewStyles returns the styles; ascii selects ASCII line art (the state
// glyphs and the `›` cursor stay: they are the non-colour signals).
func NewStyles(ascii bool) *Styles {
	n := lipgloss.NewStyle
	s := &Styles{
		ASCII:       ascii,
		Header:      n().Bold(true),
		HeaderDim:   n().Foreground(lipgloss.Color("8")),
		Rule:        n().Foreground(lipgloss.Color("8")),
		NavActive:   n().Bold(true).Foreground(lipgloss.Color("6")),
		Nav:         n().Foreground(lipgloss.Color("8")),
		Footer:      n().Foreground(lipgloss.Color("8")),
		Error:       n().Foreground(lipgloss.Color("1")),
		Toast:       n().Foreground(lipgloss.Color("2")),
		Title:       n().Bold(true),
		Subtle:      n().Foreground(lipgloss.Color("8")),
		Key:         n().Foreground(lipgloss.Color("6")),
		Bad:         n().Foreground(lipgloss.Color("1")).Bold(true),
		Good:        n().Foreground(lipgloss.Color("2")),
		Warn:        n().Foreground(lipgloss.Color("3")),
		Selected:    n().Bold(true),
		ColHeader:   n().Foreground(lipgloss.Color("8")).Bold(true),
		Dim:         n().Foreground(lipgloss.Color("8")).Faint(true),
		JSONKey:     n().Foreground(lipgloss.Color("4")),
		JSONString:  n().Foreground(lipgloss.Color("2")),
		JSONNumber:  n().Foreground(lipgloss.Color("6")),
		JSONLiteral: n().Foreground(lipgloss.Color("5")),
		Cursor:      "›",
		Mark:        "◆",
		BarFull:     "█",
		BarEmpty:    "░",
		RuleChar:    "─",
		FoldOpen:    "▾",
		FoldClosed:  "▸",
		Spark:       []string{" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"},
		Border:      lipgloss.RoundedBorder(),
		states:      map[string]lipgloss.Style{},
		memo:        map[string]string{},
	}
	if ascii {
		s.BarFull, s.BarEmpty, s.RuleChar = "#", ".", "-"
		s.FoldOpen, s.FoldClosed = "-", "+"
		s.Mark = "*"
		s.Spark = []string{" ", ".", ":", "-", "=", "+", "*", "#", "@"}
		s.Border = lipgloss.Border{Top: "-", Bottom: "-", Left: "|", Right: "|",
			TopLeft: "+", TopRight: "+", BottomLeft: "+", BottomRight: "+"}
	}
	s.Box = n().Border(s.Border).Padding(0, 1)
	return s
}

// stateStyle returns the (cached) style of a state.
func (s *Styles) stateStyle(state string) lipgloss.Style {
	st, ok := s.states[state]
	if !ok {
		st = lipgloss.NewStyle().Foreground(stateColor(state))
		s.states[state] = st
	}
	return st
}

// State renders glyph + word in the state's colour.
func (s *Styles) State(state string) string {
	k := "s:" + state
	if r, ok := s.memo[k]; ok {
		return r
	}
	r := s.stateStyle(state).Render(stateLabel(state))
	s.remember(k, r)
	return r
}

// remember caches a rendering (bounded; Styles belong to one program, and
// only its goroutine renders).
func (s *Styles) remember(k, v string) {
	if len(s.memo) > 4096 {
		clear(s.memo)
	}
	s.memo[k] = v
}

// Paint renders text in the colour of a state word.
func (s *Styles) Paint(state, text string) string {
	return s.stateStyle(state).Render(text)
}

// Bar is a progress bar of width cells for done of total, followed by the
// numbers: "██████░░░░ 6/10".
func (s *Styles) Bar(done, total, width int) string {
	if width < 1 {
		width = 1
	}
	k := "b:" + itoa(done) + "/" + itoa(total) + "/" + itoa(width)
	if r, ok := s.memo[k]; ok {
		return r
	}
	fill := 0
	if total > 0 {
		fill = min(width, done*width/total)
	}
	st := "running"
	if total > 0 && done >= total {
		st = "succeeded"
	}
	bar := s.Paint(st, strings.Repeat(s.BarFull, fill)) + s.Subtle.Render(strings.Repeat(s.BarEmpty, width-fill))
	r := bar + " " + itoa(done) + "/" + itoa(total)
	s.remember(k, r)
	return r
}

// Sparkline draws values scaled to the largest one.
func (s *Styles) Sparkline(values []int) string {
	top := 0
	for _, v := range values {
		top = max(top, v)
	}
	var b strings.Builder
	for _, v := range values {
		i := 0
		if top > 0 && v > 0 {
			i = 1 + v*(len(s.Spark)-2)/top
		}
		b.WriteString(s.Spark[i])
	}
	return b.String()
}

// rule is a horizontal line of width w.
func (s *Styles) rule(w int) string { return s.Rule.Render(strings.Repeat(s.RuleChar, max(w, 0))) }

// dimLines greys out every line of a block (stale data after a lost
// connection): colours are stripped, then the whole line is faint.
func (s *Styles) dimLines(block string) string {
	lines := strings.Split(block, "\n")
	for i, l := range lines {
		lines[i] = s.Dim.Render(ansi.Strip(l))
	}
	return strings.Join(lines, "\n")
}
