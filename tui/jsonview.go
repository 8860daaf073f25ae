package tui

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// A folding JSON viewer: documents keep their key order, containers fold
// and unfold (space/enter, E expand all, C collapse all), scalars are
// coloured by type, long values are cut to the width.

// jsonField is one top-level member of a composed document.
type jsonField struct {
	Name string
	Raw  json.RawMessage // JSON; if invalid or empty, Text is shown
	Text string          // a plain string (an error message)
}

// jnode is a parsed JSON value.
type jnode struct {
	key    string // object member name (quoted), "" otherwise
	kind   byte   // '{' '[' 's' 'n' 'b' 'z' (null)
	value  string // scalar as JSON text
	kids   []*jnode
	folded bool
	depth  int
}

// jline is one visible line: a value, or the closing bracket of an
// unfolded container.
type jline struct {
	n     *jnode
	close bool
}

// foldAbove folds containers with more children than this when opened.
const foldAbove = 50

// jsonView shows one document.
type jsonView struct {
	Common
	root  *jnode
	lines []jline
	nav   listNav
}

func newJSONView(c Common) *jsonView { return &jsonView{Common: c} }

// SetSize re-lays out the view.
func (v *jsonView) SetSize(w, h int) {
	v.Common.SetSize(w, h)
	v.nav.set(len(v.lines), h)
}

// ShortHelp implements help.KeyMap.
func (v *jsonView) ShortHelp() []key.Binding {
	return []key.Binding{v.Keys.Fold, v.Keys.ExpandAll, v.Keys.CollapseAll}
}

// FullHelp implements help.KeyMap.
func (v *jsonView) FullHelp() [][]key.Binding {
	return [][]key.Binding{v.Keys.nav(), v.ShortHelp()}
}

// SetFields replaces the document, keeping the folds of paths that still
// exist (a live refresh must not undo the user's folding).
func (v *jsonView) SetFields(fields []jsonField) {
	root := &jnode{kind: '{'}
	for _, f := range fields {
		n := parseJSON(f.Raw)
		if n == nil {
			if f.Text == "" {
				continue
			}
			n = &jnode{kind: 's', value: strconv.Quote(f.Text)}
		}
		n.key = strconv.Quote(f.Name)
		root.kids = append(root.kids, n)
	}
	setDepth(root, 0)
	if v.root != nil {
		copyFolds(v.root, root)
	}
	v.root = root
	v.relayout()
}

// parseJSON parses raw keeping member order; nil if raw is empty/invalid.
func parseJSON(raw json.RawMessage) *jnode {
	if len(bytes.TrimSpace(raw)) == 0 || !json.Valid(raw) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	n, err := parseValue(dec)
	if err != nil {
		return nil
	}
	return n
}

func parseValue(dec *json.Decoder) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &jnode{kind: byte(t)}
		for dec.More() {
			k := ""
			if t == '{' {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				s, _ := kt.(string)
				k = strconv.Quote(s)
			}
			c, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			c.key = k
			n.kids = append(n.kids, c)
		}
		if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		n.folded = len(n.kids) > foldAbove
		return n, nil
	case string:
		return &jnode{kind: 's', value: strconv.Quote(t)}, nil
	case json.Number:
		return &jnode{kind: 'n', value: t.String()}, nil
	case bool:
		return &jnode{kind: 'b', value: strconv.FormatBool(t)}, nil
	}
	return &jnode{kind: 'z', value: "null"}, nil
}

func setDepth(n *jnode, d int) {
	n.depth = d
	for _, c := range n.kids {
		setDepth(c, d+1)
	}
}

// copyFolds carries fold states from old to new by member position/name.
func copyFolds(old, new *jnode) {
	if old.kind != new.kind || (old.kind != '{' && old.kind != '[') {
		return
	}
	new.folded = old.folded
	for i, c := range new.kids {
		if i < len(old.kids) && old.kids[i].key == c.key {
			copyFolds(old.kids[i], c)
		}
	}
}

func container(n *jnode) bool { return n.kind == '{' || n.kind == '[' }

// relayout recomputes the visible lines after a fold change.
func (v *jsonView) relayout() {
	v.lines = v.lines[:0]
	if v.root != nil {
		for _, c := range v.root.kids {
			v.walk(c)
		}
	}
	v.nav.set(len(v.lines), v.Height)
}

func (v *jsonView) walk(n *jnode) {
	v.lines = append(v.lines, jline{n: n})
	if container(n) && !n.folded && len(n.kids) > 0 {
		for _, c := range n.kids {
			v.walk(c)
		}
		v.lines = append(v.lines, jline{n: n, close: true})
	}
}

func setFold(n *jnode, folded bool) {
	if container(n) {
		n.folded = folded
		for _, c := range n.kids {
			setFold(c, folded)
		}
	}
}

// Update handles navigation and folding keys.
func (v *jsonView) Update(msg tea.Msg) (*jsonView, tea.Cmd) {
	k, ok := msg.(tea.KeyMsg)
	if !ok || v.root == nil {
		return v, nil
	}
	if v.nav.key(v.Keys, k) {
		return v, nil
	}
	switch {
	case key.Matches(k, v.Keys.Fold):
		if v.nav.n > 0 {
			l := v.lines[v.nav.cursor]
			if container(l.n) {
				l.n.folded = !l.n.folded
				v.relayout()
				v.focus(l.n)
			}
		}
	case key.Matches(k, v.Keys.ExpandAll):
		for _, c := range v.root.kids {
			setFold(c, false)
		}
		v.relayout()
	case key.Matches(k, v.Keys.CollapseAll):
		for _, c := range v.root.kids {
			setFold(c, true)
		}
		v.relayout()
	}
	return v, nil
}

// focus puts the cursor on n's opening line.
func (v *jsonView) focus(n *jnode) {
	for i, l := range v.lines {
		if l.n == n && !l.close {
			v.nav.to(i)
			return
		}
	}
}

// View renders the visible lines.
func (v *jsonView) View() string {
	if v.root == nil || len(v.lines) == 0 {
		return fill(v.Styles.Subtle.Render("  (nothing to show)"), v.Width, v.Height)
	}
	out := make([]string, 0, v.Height)
	from, to := v.nav.visible()
	for i := from; i < to; i++ {
		sel := i == v.nav.cursor
		gutter := "  "
		if sel {
			gutter = v.Styles.Cursor + " "
		}
		out = append(out, fit(gutter+v.line(v.lines[i]), v.Width))
	}
	return fill(strings.Join(out, "\n"), v.Width, v.Height)
}

// line renders one line (without the gutter).
func (v *jsonView) line(l jline) string {
	st := v.Styles
	n := l.n
	indent := strings.Repeat("  ", n.depth-1)
	if l.close {
		return indent + "  " + closer(n.kind)
	}
	var b strings.Builder
	b.WriteString(indent)
	if container(n) && len(n.kids) > 0 {
		if n.folded {
			b.WriteString(st.FoldClosed + " ")
		} else {
			b.WriteString(st.FoldOpen + " ")
		}
	} else {
		b.WriteString("  ")
	}
	if n.key != "" {
		b.WriteString(st.JSONKey.Render(n.key) + ": ")
	}
	switch {
	case container(n) && len(n.kids) == 0:
		b.WriteString(string(n.kind) + closer(n.kind))
	case container(n) && n.folded:
		what := " items"
		if n.kind == '{' {
			what = " keys"
		}
		b.WriteString(string(n.kind) + "…" + closer(n.kind) + st.Subtle.Render(" "+itoa(len(n.kids))+what))
	case container(n):
		b.WriteString(string(n.kind))
	case n.kind == 's':
		b.WriteString(st.JSONString.Render(n.value))
	case n.kind == 'n':
		b.WriteString(st.JSONNumber.Render(n.value))
	default:
		b.WriteString(st.JSONLiteral.Render(n.value))
	}
	return b.String()
}

func closer(kind byte) string {
	if kind == '{' {
		return "}"
	}
	return "]"
}
