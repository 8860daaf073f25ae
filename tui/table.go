package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
)

// A small table renderer shared by every list. It renders only the visible
// rows (cost independent of the list length) and marks the selected row
// with the `›` cursor, which survives NO_COLOR.

// column describes one table column.
type column struct {
	Title string
	Width int // fixed width; 0 = flexible
	Flex  int // share of the width left after fixed columns (default 1)
	Min   int // minimum width of a flexible column
	Right bool
	// Drop orders what goes when the columns do not fit: the column with
	// the highest Drop goes first, then the next; 0 is never dropped.
	// Give low-value columns (wide, or repeated elsewhere on the screen)
	// the highest numbers, so narrow terminals keep what matters.
	Drop int
}

// layout resolves flexible column widths for a table total cells wide
// (the cursor gutter of 2 cells and one space between columns included).
// Flexible columns share what the fixed ones leave, by Flex, never below
// their Min.
func layout(cols []column, total int) []int {
	w := make([]int, len(cols))
	left := total - 2 - (len(cols) - 1)
	flex := 0
	for i, c := range cols {
		if c.Width > 0 {
			w[i] = c.Width
			left -= c.Width
		} else {
			flex += max(c.Flex, 1)
		}
	}
	left = max(left, 0)
	for i, c := range cols {
		if c.Width == 0 {
			w[i] = max(c.Min, left*max(c.Flex, 1)/max(flex, 1))
		}
	}
	if sum(w) <= left+fixedSum(cols) {
		return w
	}
	// A Min raised a share past what is left: give every flexible column
	// its Min, then share the rest by Flex.
	extra := left
	for i, c := range cols {
		if c.Width == 0 {
			w[i] = c.Min
			extra -= c.Min
		}
	}
	extra = max(extra, 0)
	for i, c := range cols {
		if c.Width == 0 {
			w[i] += extra * max(c.Flex, 1) / max(flex, 1)
		}
	}
	return w
}

func sum(w []int) int {
	n := 0
	for _, x := range w {
		n += x
	}
	return n
}

func fixedSum(cols []column) int {
	n := 0
	for _, c := range cols {
		n += c.Width
	}
	return n
}

// need is the width cols take at the least: gutter, gaps, fixed widths
// and the flexible columns' minimums.
func need(cols []column) int {
	n := 2 + len(cols) - 1
	for _, c := range cols {
		n += max(c.Width, c.Min)
	}
	return n
}

// fitColumns drops columns, highest Drop first, until the rest fit total
// cells; it returns the kept columns and their indexes in cols.
func fitColumns(cols []column, total int) ([]column, []int) {
	keep := make([]int, len(cols))
	for i := range cols {
		keep[i] = i
	}
	kept := cols
	for need(kept) > total {
		worst := -1
		for j, i := range keep {
			if d := cols[i].Drop; d > 0 && (worst < 0 || d > cols[keep[worst]].Drop) {
				worst = j
			}
		}
		if worst < 0 {
			break // nothing more may go: cells are cut instead
		}
		keep = append(keep[:worst:worst], keep[worst+1:]...)
		kept = make([]column, len(keep))
		for j, i := range keep {
			kept[j] = cols[i]
		}
	}
	return kept, keep
}

// listNav is the cursor and scroll offset of a list of n rows shown h rows
// at a time.
type listNav struct{ cursor, offset, n, h int }

func (l *listNav) set(n, h int) {
	l.n, l.h = n, max(h, 1)
	l.clamp()
}

func (l *listNav) clamp() {
	l.cursor = max(0, min(l.cursor, l.n-1))
	if l.cursor < l.offset {
		l.offset = l.cursor
	}
	if l.cursor >= l.offset+l.h {
		l.offset = l.cursor - l.h + 1
	}
	l.offset = max(0, min(l.offset, l.n-l.h))
}

func (l *listNav) move(d int) { l.cursor += d; l.clamp() }

// to puts the cursor on row i.
func (l *listNav) to(i int) { l.cursor = i; l.clamp() }

// visible is the half-open range of rows on screen.
func (l *listNav) visible() (int, int) { return l.offset, min(l.n, l.offset+l.h) }

// key moves the cursor for a navigation key; it reports whether msg was one.
func (l *listNav) key(k *KeyMap, msg tea.KeyMsg) bool {
	switch {
	case key.Matches(msg, k.Up):
		l.move(-1)
	case key.Matches(msg, k.Down):
		l.move(1)
	case key.Matches(msg, k.PageUp):
		l.move(-l.h)
	case key.Matches(msg, k.PageDown):
		l.move(l.h)
	case key.Matches(msg, k.Top):
		l.to(0)
	case key.Matches(msg, k.Bottom):
		l.to(l.n - 1)
	default:
		return false
	}
	return true
}

// table renders a header and the visible rows of a list.
type table struct {
	st     *Styles
	cols   []column // the columns shown
	keep   []int    // their indexes in the columns asked for (cells are given for those)
	widths []int
	width  int
	marked func(i int) bool // rows marked for a bulk action (nil: none)
}

func newTable(st *Styles, cols []column, width int) table {
	shown, keep := fitColumns(cols, width)
	return table{st: st, cols: shown, keep: keep, widths: layout(shown, width), width: width}
}

// header renders the column titles.
func (t table) header() string {
	cells := make([]string, len(t.cols))
	for i, c := range t.cols {
		cells[i] = c.Title
	}
	return t.st.ColHeader.Render(t.line("  ", t.unkept(cells)))
}

// unkept spreads the shown columns' cells to the indexes of the columns
// asked for (the header's titles are given per shown column).
func (t table) unkept(cells []string) []string {
	if len(t.keep) == 0 {
		return cells
	}
	out := make([]string, t.keep[len(t.keep)-1]+1)
	for j, i := range t.keep {
		out[i] = cells[j]
	}
	return out
}

// line joins cells (one per column asked for) fitted to the shown
// columns' widths after a 2-cell gutter.
func (t table) line(gutter string, cells []string) string {
	var b strings.Builder
	b.WriteString(gutter)
	for i, w := range t.widths {
		if i > 0 {
			b.WriteByte(' ')
		}
		c := ""
		if j := t.keep[i]; j < len(cells) {
			c = cells[j]
		}
		if t.cols[i].Right {
			b.WriteString(padLeft(c, w))
		} else {
			b.WriteString(pad(c, w))
		}
	}
	return fit(b.String(), t.width)
}

// row renders one row; the selected one gets the cursor and the selection
// style (its colours are dropped so the highlight reads as one bar).
func (t table) row(cells []string, selected bool) string { return t.markedRow(cells, selected, false) }

// markedRow is row with a mark in the gutter's second cell.
func (t table) markedRow(cells []string, selected, marked bool) string {
	mark := " "
	if marked {
		mark = t.st.Mark
	}
	if !selected {
		return t.line(" "+mark, cells)
	}
	l := t.line(t.st.Cursor+mark, cells)
	return t.st.Selected.Render(ansi.Strip(l))
}

// render draws the header and rows [from, to) of a list; cells returns one
// row's cells. Blank lines fill up to h lines (header included).
func (t table) render(nav listNav, h int, empty string, cells func(i int) []string) string {
	lines := make([]string, 0, h)
	lines = append(lines, t.header())
	from, to := nav.visible()
	for i := from; i < to && len(lines) < h; i++ {
		lines = append(lines, t.markedRow(cells(i), i == nav.cursor, t.marked != nil && t.marked(i)))
	}
	if nav.n == 0 && empty != "" {
		lines = append(lines, "  "+t.st.Subtle.Render(empty))
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}
