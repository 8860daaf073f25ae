package tui

import "strings"

// The finally band of the task graph and the task table.
//
// A run's finally tasks run once its body has settled, whatever the
// outcome; they depend on no body task. Laid out with the body they would
// sit among its roots, as if they ran first. So they are laid out as a
// graph of their own and drawn below the body, under a rule that says
// "finally"; the task table lists them last, under the same rule.

// layoutDAG lays out nodes (in the run's task order): the body, and the
// finally tasks in a band below it (their dependencies on body tasks, if
// any, are not drawn: the band runs after the whole body).
func layoutDAG(nodes []dagNode) *dag {
	var body, fin []dagNode
	for _, n := range nodes {
		if n.Finally {
			fin = append(fin, n)
		} else {
			body = append(body, n)
		}
	}
	g := layoutLayers(body)
	if len(fin) == 0 {
		return g
	}
	g.appendBand(layoutLayers(fin))
	return g
}

// appendBand adds f's vertices below g's, one separator row apart.
func (g *dag) appendBand(f *dag) {
	off, rowOff := len(g.vs), g.height+1
	g.finallyRow, g.hasFinally = g.height, true
	shift := func(ids []int) []int {
		out := make([]int, len(ids))
		for i, id := range ids {
			out[i] = id + off
		}
		return out
	}
	for _, v := range f.vs {
		v.row += rowOff
		v.preds, v.succs = shift(v.preds), shift(v.succs)
		g.vs = append(g.vs, v)
	}
	for k, id := range f.byKey {
		if _, dup := g.byKey[k]; !dup {
			g.byKey[k] = id + off
		}
	}
	for i, l := range f.layers {
		for len(g.layers) <= i {
			g.layers = append(g.layers, nil)
		}
		g.layers[i] = append(g.layers[i], shift(l)...)
	}
	g.height = rowOff + f.height
}

// finallyLabel heads the finally band and the finally rows of the table.
const finallyLabel = " finally: runs once the body has settled "

// finallyRule is the rule above the finally band, w cells wide.
func finallyRule(st *Styles, w int) string {
	dash := "─"
	if st.ASCII {
		dash = "-"
	}
	s := dash + dash + finallyLabel
	if n := w - width(s); n > 0 {
		s += strings.Repeat(dash, n)
	}
	return st.Subtle.Render(s)
}

// drawFinallyRule writes the rule on the separator row of a drawing.
func (g *dag) drawFinallyRule(st *Styles, out *drawing) {
	if g.hasFinally && g.finallyRow < len(out.lines) {
		out.lines[g.finallyRow] = finallyRule(st, out.width)
	}
}

// finallyLast orders a run's tasks body first, then its finally tasks
// (each in run order); it reports the index of the first finally task
// (-1: none).
func finallyLast[T any](tasks []T, finally func(*T) bool) int {
	var body, fin []T
	for i := range tasks {
		if finally(&tasks[i]) {
			fin = append(fin, tasks[i])
		} else {
			body = append(body, tasks[i])
		}
	}
	if len(fin) == 0 {
		return -1
	}
	copy(tasks, append(body, fin...))
	return len(body)
}

// withFinallyRule inserts the finally rule into a rendered task table
// (header, then rows from..to of the list) above the first finally row,
// or at the edge of the view the finally rows lie beyond. The list is
// shown one row shorter while the run has finally tasks, so the table
// keeps its height.
func withFinallyRule(st *Styles, table string, first, from, to, w int) string {
	if first < 0 {
		return table
	}
	lines := strings.Split(table, "\n")
	at := 1 + min(max(first-from, 0), to-from)
	if at > len(lines) {
		return table
	}
	lines = append(lines[:at], append([]string{"  " + finallyRule(st, w-2)}, lines[at:]...)...)
	return strings.Join(lines[:len(lines)-1], "\n")
}
