package tui

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// A layered ASCII drawing of a run's task graph (left to right).
//
// Layout (a small Sugiyama): a task's layer is the longest path from a
// root (a task without dependencies); an edge spanning several layers gets
// a dummy vertex in each layer it crosses (drawn as a straight line);
// vertices are ordered within layers by barycenter sweeps to reduce
// crossings, then given rows: each prefers the median row of its
// neighbours (so chains draw straight), keeping the layer's order.
//
// Drawing: every gap between layers has one vertical channel per set of
// successors among the sources that need to change rows (sources with the
// same successors share one, so a fan-in is one bus). Edge cells are drawn from a bitmask of the
// directions they connect (box-drawing ─ │ ┌ ┬ ┼ …, or - | + under
// --ascii), so joins, forks and crossings come out consistently; `▶` (`>`)
// marks the arrow into a task; the selected task gets the `›` cursor in
// the column before it. Parallel tasks are drawn as one group node
// (dag_group.go).

// dagNode is one task as the graph needs it.
type dagNode struct {
	Key   string
	Type  string
	State string
	Deps  []string // task keys; unknown keys are ignored
	// Finally: one of the run's finally tasks, drawn in a band of its own
	// below the body (dag_finally.go).
	Finally bool
	// A group node (dag_group.go): its name, members and their states.
	Group   string
	Members []string
	States  []string
}

// vertex is a task or a dummy (key "") on a long edge.
type vertex struct {
	key   string
	state string
	group *dagNode // a group node, nil for a task
	layer int
	row   int
	preds []int
	succs []int
}

// dag is a laid-out graph.
type dag struct {
	vs     []vertex
	layers [][]int // vertex ids per layer, in order
	byKey  map[string]int
	height int // rows
	// finallyRow is the separator row above the finally band (when
	// hasFinally; dag_finally.go).
	finallyRow int
	hasFinally bool
}

// maxLabel caps a task label's width.
const maxLabel = 24

// layoutLayers lays out nodes (in the run's task order) as one graph;
// layoutDAG (dag_finally.go) adds the finally band.
func layoutLayers(nodes []dagNode) *dag {
	g := &dag{byKey: make(map[string]int, len(nodes))}
	for _, n := range nodes {
		if _, dup := g.byKey[n.Key]; dup {
			continue
		}
		g.byKey[n.Key] = len(g.vs)
		v := vertex{key: n.Key, state: n.State}
		if len(n.Members) > 0 {
			v.group = &n
		}
		g.vs = append(g.vs, v)
	}
	deps := make([][]int, len(g.vs))
	for _, n := range nodes {
		v := g.byKey[n.Key]
		for _, d := range n.Deps {
			if u, ok := g.byKey[d]; ok && u != v && !slices.Contains(deps[v], u) {
				deps[v] = append(deps[v], u)
			}
		}
	}
	g.assignLayers(deps)
	nReal := len(g.vs)
	for v := range nReal {
		for _, u := range deps[v] {
			g.addEdge(u, v)
		}
	}
	g.layers = make([][]int, 0)
	for id, v := range g.vs {
		for len(g.layers) <= v.layer {
			g.layers = append(g.layers, nil)
		}
		g.layers[v.layer] = append(g.layers[v.layer], id)
	}
	g.order()
	g.assignRows()
	return g
}

// assignLayers sets layer = longest path from a root (cycles, which a
// valid spec cannot have, are cut where the walk finds them).
func (g *dag) assignLayers(deps [][]int) {
	const (
		unseen = iota
		visiting
		done
	)
	state := make([]int, len(g.vs))
	var walk func(v int) int
	walk = func(v int) int {
		switch state[v] {
		case done:
			return g.vs[v].layer
		case visiting:
			return -1 // a cycle: ignore this edge
		}
		state[v] = visiting
		l := 0
		for _, u := range deps[v] {
			if lu := walk(u); lu >= 0 {
				l = max(l, lu+1)
			}
		}
		state[v] = done
		g.vs[v].layer = l
		return l
	}
	for v := range g.vs {
		walk(v)
	}
}

// addEdge links u to v, through dummies when v is more than one layer on.
func (g *dag) addEdge(u, v int) {
	if g.vs[v].layer <= g.vs[u].layer {
		return // a cut cycle edge
	}
	prev := u
	for l := g.vs[u].layer + 1; l < g.vs[v].layer; l++ {
		d := len(g.vs)
		g.vs = append(g.vs, vertex{layer: l})
		g.vs[prev].succs = append(g.vs[prev].succs, d)
		g.vs[d].preds = append(g.vs[d].preds, prev)
		prev = d
	}
	g.vs[prev].succs = append(g.vs[prev].succs, v)
	g.vs[v].preds = append(g.vs[v].preds, prev)
}

// order sorts each layer by the barycenter of its neighbours, sweeping
// down and up a few times.
func (g *dag) order() {
	pos := make([]float64, len(g.vs))
	setPos := func(layer []int) {
		for i, v := range layer {
			pos[v] = float64(i)
		}
	}
	for _, l := range g.layers {
		setPos(l)
	}
	sweep := func(l []int, near func(v int) []int) {
		bary := make(map[int]float64, len(l))
		for _, v := range l {
			ns := near(v)
			if len(ns) == 0 {
				bary[v] = pos[v]
				continue
			}
			s := 0.0
			for _, n := range ns {
				s += pos[n]
			}
			bary[v] = s / float64(len(ns))
		}
		sort.SliceStable(l, func(i, j int) bool { return bary[l[i]] < bary[l[j]] })
		setPos(l)
	}
	for range 4 {
		for i := 1; i < len(g.layers); i++ {
			sweep(g.layers[i], func(v int) []int { return g.vs[v].preds })
		}
		for i := len(g.layers) - 2; i >= 0; i-- {
			sweep(g.layers[i], func(v int) []int { return g.vs[v].succs })
		}
	}
}

// assignRows places each layer's vertices at rows near the median of their
// predecessors (then the roots near their successors), in layer order.
func (g *dag) assignRows() {
	for _, l := range g.layers {
		g.height = max(g.height, len(l))
	}
	place := func(l []int, near func(v int) []int) {
		next := 0
		for i, v := range l {
			want := next
			if ns := near(v); len(ns) > 0 {
				rows := make([]int, len(ns))
				for j, n := range ns {
					rows[j] = g.vs[n].row
				}
				slices.Sort(rows)
				want = rows[(len(rows)-1)/2]
			}
			r := max(next, min(want, g.height-(len(l)-i)))
			g.vs[v].row = r
			next = r + 1
		}
	}
	for i, l := range g.layers {
		if i == 0 {
			place(l, func(int) []int { return nil })
			continue
		}
		place(l, func(v int) []int { return g.vs[v].preds })
	}
	if len(g.layers) > 1 {
		place(g.layers[0], func(v int) []int { return g.vs[v].succs })
	}
}

// label is the text of a task vertex.
func (v vertex) label() string {
	if v.group != nil {
		return groupLabel(v.group.Group, v.group.States)
	}
	return stateGlyph(v.state) + " " + fit(v.key, maxLabel-2)
}

// has reports whether the vertex draws task key k (itself or a member).
func (v vertex) has(k string) bool {
	if v.group != nil {
		return slices.Contains(v.group.Members, k)
	}
	return k != "" && v.key == k
}

// task is the task key that selecting the vertex selects (a group's
// first member).
func (v vertex) task() string {
	if v.group != nil {
		return v.group.Members[0]
	}
	return v.key
}

// Edge-cell directions.
const (
	dirL uint8 = 1 << iota
	dirR
	dirU
	dirD
)

// canvas is the drawing: edge masks plus placed labels.
type canvas struct {
	w, h  int
	mask  [][]uint8
	text  [][]rune
	nodes [][]placed // per row, sorted by x
}

type placed struct {
	x, w  int
	label string
	state string
	sel   bool
}

func newCanvas(w, h int) *canvas {
	c := &canvas{w: w, h: h, mask: make([][]uint8, h), text: make([][]rune, h), nodes: make([][]placed, h)}
	for r := range h {
		c.mask[r] = make([]uint8, w)
		c.text[r] = make([]rune, w)
	}
	return c
}

func (c *canvas) hline(r, x1, x2 int) {
	if x1 > x2 {
		x1, x2 = x2, x1
	}
	for x := x1; x <= x2; x++ {
		if x > x1 {
			c.mask[r][x] |= dirL
		}
		if x < x2 {
			c.mask[r][x] |= dirR
		}
	}
}

func (c *canvas) vline(x, r1, r2 int) {
	if r1 > r2 {
		r1, r2 = r2, r1
	}
	for r := r1; r <= r2; r++ {
		if r > r1 {
			c.mask[r][x] |= dirU
		}
		if r < r2 {
			c.mask[r][x] |= dirD
		}
	}
}

// drawing is a rendered graph: one string per row, plus where the selected
// task is (for scrolling it into view).
type drawing struct {
	lines      []string
	width      int
	selX, selY int
	// boxes are the drawn nodes (for counting what a view clips).
	boxes []box
}

// box is where a node is drawn: columns [x, x+w) of row.
type box struct{ x, w, row int }

// render draws the graph; sel is the selected task key.
func (g *dag) render(st *Styles, sel string) drawing {
	if len(g.vs) == 0 {
		return drawing{}
	}
	// Layer widths and x positions; channels per gap.
	widths := make([]int, len(g.layers))
	for i, l := range g.layers {
		widths[i] = 3
		for _, v := range l {
			if g.vs[v].key != "" {
				widths[i] = max(widths[i], len([]rune(g.vs[v].label()))+2)
			}
		}
	}
	chans := make([]map[int]int, len(g.layers)) // source vertex -> channel index
	xs := make([]int, len(g.layers))
	x := 1 // column 0 holds the cursor of the first layer
	for i, l := range g.layers {
		xs[i] = x
		chans[i] = map[int]int{}
		var srcs []int
		for _, v := range l {
			for _, s := range g.vs[v].succs {
				if g.vs[s].row != g.vs[v].row {
					srcs = append(srcs, v)
					break
				}
			}
		}
		sort.Slice(srcs, func(a, b int) bool { return g.vs[srcs[a]].row < g.vs[srcs[b]].row })
		// Sources with the same successors share a channel (a fan-in
		// draws as one bus, not one line per source).
		bus := map[string]int{}
		for _, v := range srcs {
			succs := slices.Clone(g.vs[v].succs)
			slices.Sort(succs)
			sig := fmt.Sprint(succs)
			if _, ok := bus[sig]; !ok {
				bus[sig] = len(bus)
			}
			chans[i][v] = bus[sig]
		}
		x += widths[i] + len(bus) + 4
	}
	width := x - 4
	c := newCanvas(width+1, g.height)
	out := drawing{width: width, selX: -1, selY: -1}
	arrowHead := '▶'
	if st.ASCII {
		arrowHead = '>'
	}
	for i, l := range g.layers {
		end := xs[i] + widths[i]
		for _, v := range l {
			vx := g.vs[v]
			start := end // where this vertex's outgoing edge starts
			if vx.key == "" {
				c.hline(vx.row, xs[i]-1, end-1) // a long edge passing through
			} else {
				lbl := "[" + vx.label() + "]"
				start = xs[i] + len([]rune(lbl))
				p := placed{x: xs[i], w: len([]rune(lbl)), label: lbl, state: vx.state, sel: vx.has(sel)}
				c.nodes[vx.row] = append(c.nodes[vx.row], p)
				out.boxes = append(out.boxes, box{x: p.x, w: p.w, row: vx.row})
				if p.sel {
					out.selX, out.selY = xs[i], vx.row
				}
			}
			if len(vx.succs) == 0 || i+1 >= len(g.layers) {
				continue
			}
			ch, hasCh := chans[i][v]
			arrow := xs[i+1] - 2
			if hasCh {
				cx := end + 1 + ch
				c.hline(vx.row, start, cx)
				lo, hi := vx.row, vx.row
				for _, s := range vx.succs {
					lo, hi = min(lo, g.vs[s].row), max(hi, g.vs[s].row)
				}
				c.vline(cx, lo, hi)
				for _, s := range vx.succs {
					c.hline(g.vs[s].row, cx, arrow)
				}
			} else {
				c.hline(vx.row, start, arrow)
			}
			for _, s := range vx.succs {
				if g.vs[s].key != "" {
					c.text[g.vs[s].row][arrow] = arrowHead
				} else {
					c.hline(g.vs[s].row, arrow, arrow+1) // into a dummy: keep the line going
				}
			}
		}
	}
	out.lines = c.lines(st)
	g.drawFinallyRule(st, &out)
	return out
}

// lines turns the canvas into styled strings.
func (c *canvas) lines(st *Styles) []string {
	out := make([]string, c.h)
	for r := range c.h {
		var b strings.Builder
		nodes := c.nodes[r]
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].x < nodes[j].x })
		ni := 0
		var edge strings.Builder
		flush := func() {
			if edge.Len() > 0 {
				b.WriteString(st.Subtle.Render(edge.String()))
				edge.Reset()
			}
		}
		for x := 0; x < c.w; x++ {
			if ni < len(nodes) && nodes[ni].x == x+1 && nodes[ni].sel {
				flush()
				b.WriteString(st.Cursor)
				continue
			}
			if ni < len(nodes) && nodes[ni].x == x {
				flush()
				n := nodes[ni]
				lbl := pad(n.label, n.w)
				if n.sel {
					lbl = st.Selected.Render(st.Paint(n.state, lbl))
				} else {
					lbl = st.Paint(n.state, lbl)
				}
				b.WriteString(lbl)
				x += n.w - 1
				ni++
				continue
			}
			if t := c.text[r][x]; t != 0 {
				edge.WriteRune(t)
				continue
			}
			edge.WriteString(edgeChar(c.mask[r][x], st.ASCII))
		}
		flush()
		out[r] = strings.TrimRight(b.String(), " ")
	}
	return out
}

// boxChars maps a direction mask (L R U D bits) to its box-drawing cell.
var boxChars = [16]string{
	" ", "─", "─", "─", // -, L, R, LR
	"│", "┘", "└", "┴", // U, UL, UR, ULR
	"│", "┐", "┌", "┬", // D, DL, DR, DLR
	"│", "┤", "├", "┼", // UD, UDL, UDR, UDLR
}

func edgeChar(m uint8, ascii bool) string {
	if !ascii {
		return boxChars[m&15]
	}
	switch {
	case m == 0:
		return " "
	case m&(dirU|dirD) == 0:
		return "-"
	case m&(dirL|dirR) == 0:
		return "|"
	}
	return "+"
}
