package tui

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/flowd/flowd/rpc"
)

// Messages of the run detail screen.

// runLoadedMsg answers run.get.
type runLoadedMsg struct {
	id  string // as requested
	run *rpc.Run
	err error
}

// runHistoryMsg answers events.list for the run (the timeline backfill).
type runHistoryMsg struct {
	id  string
	evs []rpc.Event
	err error
}

// Panes of the run detail.
const (
	paneTasks = iota
	paneGraph
	paneTimeline
	paneJSON
	numPanes
)

var paneNames = [numPanes]string{"Tasks", "Graph", "Timeline", "JSON"}

// runDetail shows one run: a summary, then one of four panes (tasks,
// graph, timeline, JSON). It refetches run.get when an event names the run
// (at most one call in flight; events arriving meanwhile cause one more).
type runDetail struct {
	Common
	outbox
	active   bool
	id       string // requested (maybe short) id
	run      *rpc.Run
	pane     int
	tasks    listNav
	firstFin int // index of the first finally task in run.Tasks (listed last), -1: none
	selKey   string
	graph    *dag
	nodes    []dagNode         // the run's tasks as the graph sees them
	groups   []dagGroup        // parallel tasks drawn as one node
	groupOf  map[string]string // task key -> group id
	expanded map[string]bool   // group ids drawn member by member
	drawing  drawing
	gx, gy   int // graph scroll
	timeline *eventLog
	json     *jsonView
	inflight bool
	dirty    bool
}

func newRunDetail(c Common) *runDetail {
	return &runDetail{Common: c, timeline: newEventLog(c, 2000, false), json: newJSONView(c)}
}

// Title is the screen name.
func (m *runDetail) Title() string { return "Run" }

// open switches to run id and loads it.
func (m *runDetail) open(id string) tea.Cmd {
	if m.run != nil && (m.run.ID == id || m.id == id) {
		return m.fetch()
	}
	m.id, m.run, m.graph, m.selKey, m.gx, m.gy = id, nil, nil, "", 0, 0
	m.expanded = map[string]bool{}
	m.tasks = listNav{}
	m.pane = paneTasks
	m.timeline.reset()
	m.json.root = nil
	m.json.relayout()
	m.inflight = false
	return tea.Batch(m.fetch(), m.history())
}

func (m *runDetail) bodyHeight() int { return max(m.Height-5, 1) }

// SetSize re-lays out the panes.
func (m *runDetail) SetSize(w, h int) {
	m.Common.SetSize(w, h)
	m.tasks.set(m.taskCount(), m.taskRows())
	m.timeline.SetSize(w, m.bodyHeight())
	m.json.SetSize(w, m.bodyHeight())
}

func (m *runDetail) taskCount() int {
	if m.run == nil {
		return 0
	}
	return len(m.run.Tasks)
}

// ShortHelp implements help.KeyMap.
func (m *runDetail) ShortHelp() []key.Binding {
	k := m.Keys
	return []key.Binding{k.NextPane, k.Open, k.Cancel, k.Back, k.Help}
}

// FullHelp implements help.KeyMap.
func (m *runDetail) FullHelp() [][]key.Binding {
	k := m.Keys
	pause := k.Pause
	pause.SetHelp("p", "pause/resume the task's queue for this run")
	group := key.NewBinding(key.WithKeys("enter", " "), key.WithHelp("enter/space", "expand/collapse a task group (graph)"))
	return [][]key.Binding{k.nav(), {k.NextPane, k.PrevPane, k.Open, k.Left, k.Right, k.Fold, k.ExpandAll, k.CollapseAll, group},
		append(k.runActions(), pause), k.global()}
}

// Capturing: the run detail has no text input.
func (m *runDetail) Capturing() bool { return false }

// Back never consumes esc.
func (m *runDetail) Back() bool { return false }

// Focus refetches if the run changed while hidden.
func (m *runDetail) Focus() tea.Cmd {
	m.active = true
	return m.plan()
}

// Blur is called when the screen is hidden.
func (m *runDetail) Blur() { m.active = false }

func (m *runDetail) fetch() tea.Cmd {
	if m.id == "" {
		return nil
	}
	m.inflight, m.dirty = true, false
	client, id := m.Client, m.id
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		r, err := client.RunGet(cx, id)
		return runLoadedMsg{id: id, run: r, err: err}
	}
}

func (m *runDetail) history() tea.Cmd {
	client, id := m.Client, m.id
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.EventsList(cx, rpc.EventsListParams{RunID: id, Limit: 1000, Latest: true})
		if err != nil {
			return runHistoryMsg{id: id, err: err}
		}
		return runHistoryMsg{id: id, evs: res.Events}
	}
}

func (m *runDetail) plan() tea.Cmd {
	if m.active && m.dirty && !m.inflight {
		return m.fetch()
	}
	return nil
}

// Update handles keys, loads and events.
func (m *runDetail) Update(msg tea.Msg) (*runDetail, tea.Cmd) {
	switch msg := msg.(type) {
	case runLoadedMsg:
		if msg.id != m.id {
			return m, nil
		}
		m.inflight = false
		if msg.err != nil {
			return m, errorCmd(msg.err)
		}
		m.setRun(msg.run)
		return m, m.plan()
	case runHistoryMsg:
		if msg.id != m.id {
			return m, nil
		}
		if msg.err != nil {
			return m, errorCmd(msg.err)
		}
		m.timeline.merge(msg.evs)
		return m, nil
	case eventsMsg:
		if m.run == nil {
			return m, nil
		}
		var mine []rpc.Event
		for _, e := range msg.Events {
			if e.RunID == m.run.ID {
				mine = append(mine, e)
			}
		}
		if len(mine) > 0 || msg.Resync {
			m.timeline.add(mine)
			m.dirty = true
		}
		return m, m.plan()
	case resyncMsg:
		if m.id == "" {
			return m, nil
		}
		m.dirty = true
		return m, tea.Batch(m.plan(), m.history()) // events may have been missed
	case tea.KeyMsg:
		return m, m.key(msg)
	}
	return m, nil
}

func (m *runDetail) setRun(r *rpc.Run) {
	m.run = r
	m.firstFin = finallyLast(r.Tasks, func(t *rpc.Task) bool { return t.Finally })
	m.tasks.set(len(r.Tasks), m.taskRows())
	if i := m.taskIndex(m.selKey); i >= 0 {
		m.tasks.to(i)
	}
	m.selKey = m.selectedKey()
	nodes := make([]dagNode, len(r.Tasks))
	for i, t := range r.Tasks {
		deps := t.Deps
		if t.SpawnedBy != "" && !slices.Contains(deps, t.SpawnedBy) {
			deps = append(slices.Clone(deps), t.SpawnedBy)
		}
		nodes[i] = dagNode{Key: t.Key, Type: t.Type, State: string(t.State), Deps: deps, Finally: t.Finally}
	}
	m.nodes = nodes
	m.groups, m.groupOf = groupCandidates(nodes)
	m.relayout()
	m.json.SetFields(runDocument(r))
}

// runDocument is the JSON pane's document: input, results, errors.
func runDocument(r *rpc.Run) []jsonField {
	fields := []jsonField{{Name: "input", Raw: r.Input}}
	results, errs := map[string]json.RawMessage{}, map[string]string{}
	var rkeys, ekeys []string
	for _, t := range r.Tasks {
		if len(t.Result) > 0 {
			results[t.Key] = t.Result
			rkeys = append(rkeys, t.Key)
		}
		if t.Error != "" {
			errs[t.Key] = t.Error
			ekeys = append(ekeys, t.Key)
		}
	}
	fields = append(fields, jsonField{Name: "results", Raw: orderedObject(rkeys, func(k string) json.RawMessage { return results[k] })})
	fields = append(fields, jsonField{Name: "errors", Raw: orderedObject(ekeys, func(k string) json.RawMessage {
		b, _ := json.Marshal(errs[k])
		return b
	})})
	if r.Reason != "" {
		fields = append(fields, jsonField{Name: "reason", Text: r.Reason})
	}
	return fields
}

// orderedObject builds a JSON object with keys in the given order.
func orderedObject(keys []string, val func(string) json.RawMessage) json.RawMessage {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		v := val(k)
		if !json.Valid(v) {
			v, _ = json.Marshal(string(v))
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return json.RawMessage(b.String())
}

func (m *runDetail) taskIndex(k string) int {
	if m.run == nil || k == "" {
		return -1
	}
	for i, t := range m.run.Tasks {
		if t.Key == k {
			return i
		}
	}
	return -1
}

func (m *runDetail) selectedKey() string {
	if m.run == nil || len(m.run.Tasks) == 0 {
		return ""
	}
	return m.run.Tasks[m.tasks.cursor].Key
}

// selectKey moves the selection (tasks and graph share it).
func (m *runDetail) selectKey(k string) {
	if i := m.taskIndex(k); i >= 0 {
		m.tasks.to(i)
		m.selKey = k
		m.redraw()
	}
}

// relayout lays the graph out again (after a load, or a group folded).
func (m *runDetail) relayout() {
	m.graph = layoutDAG(collapse(m.nodes, m.groups, m.groupOf, m.expanded))
	m.redraw()
}

// fold expands the group drawn at the selection, or collapses the
// expanded group the selected task belongs to; false if neither applies.
func (m *runDetail) fold(expand bool) bool {
	gid, ok := m.groupOf[m.selKey]
	if !ok || m.expanded[gid] == expand {
		return false
	}
	if m.expanded == nil {
		m.expanded = map[string]bool{}
	}
	m.expanded[gid] = expand
	m.relayout()
	return true
}

func (m *runDetail) redraw() {
	if m.graph == nil {
		return
	}
	m.drawing = m.graph.render(m.Styles, m.selKey)
	// Scroll the selected task into view.
	w, h := m.Width, m.graphRows()
	if m.drawing.selX >= 0 {
		if m.drawing.selX-1 < m.gx || m.drawing.selX+maxLabel > m.gx+w {
			m.gx = max(0, m.drawing.selX-w/3)
		}
		if m.drawing.selY < m.gy || m.drawing.selY >= m.gy+h {
			m.gy = max(0, m.drawing.selY-h/2)
		}
	}
}

func (m *runDetail) key(msg tea.KeyMsg) tea.Cmd {
	k := m.Keys
	switch {
	case key.Matches(msg, k.NextPane):
		m.pane = (m.pane + 1) % numPanes
		return nil
	case key.Matches(msg, k.PrevPane):
		m.pane = (m.pane + numPanes - 1) % numPanes
		return nil
	}
	if m.run != nil {
		if v, ok := verbFor(k, msg); ok {
			m.post(confirmRun(m.Common, v, *m.run))
			return nil
		}
		if key.Matches(msg, k.EditReplay) {
			m.post(editReplay(m.Common, *m.run))
			return nil
		}
		if key.Matches(msg, k.Pause) && (m.pane == paneTasks || m.pane == paneGraph) {
			if i := m.taskIndex(m.selKey); i >= 0 {
				m.post(confirmRunQueuePause(m.Common, *m.run, m.run.Tasks[i].Queue))
			}
			return nil
		}
	}
	switch m.pane {
	case paneTasks:
		if m.tasks.key(k, msg) {
			m.selKey = m.selectedKey()
			m.redraw()
			return nil
		}
	case paneGraph:
		if m.graphKey(msg) {
			return nil
		}
		if key.Matches(msg, k.Open) && m.fold(true) {
			return nil // enter on a group expands it
		}
		if msg.String() == " " && m.fold(false) {
			return nil // space on a member collapses its group
		}
	case paneTimeline:
		m.timeline, _ = m.timeline.Update(msg)
		return nil
	case paneJSON:
		m.json, _ = m.json.Update(msg)
		return nil
	}
	if key.Matches(msg, k.Open) && m.selKey != "" && m.run != nil {
		// A task of type run opens its child run; any other, the task.
		for _, t := range m.run.Tasks {
			if t.Key == m.selKey && t.ChildRun != "" {
				m.post(openRunMsg{id: t.ChildRun})
				return nil
			}
		}
		m.post(openTaskMsg{runID: m.run.ID, key: m.selKey})
	}
	return nil
}

// graphKey moves the selection through the graph: j/k within the layer
// order, h/l to the neighbouring layer.
func (m *runDetail) graphKey(msg tea.KeyMsg) bool {
	if m.graph == nil || len(m.graph.layers) == 0 {
		return false
	}
	k := m.Keys
	g := m.graph
	var order []int // real vertices, layer by layer, by row
	for _, l := range g.layers {
		for _, v := range l {
			if g.vs[v].key != "" {
				order = append(order, v)
			}
		}
	}
	cur := slices.IndexFunc(order, func(v int) bool { return g.vs[v].has(m.selKey) })
	pick := func(i int) {
		if len(order) > 0 {
			m.selectKey(g.vs[order[max(0, min(i, len(order)-1))]].task())
		}
	}
	switch {
	case key.Matches(msg, k.Down):
		pick(cur + 1)
	case key.Matches(msg, k.Up):
		pick(cur - 1)
	case key.Matches(msg, k.Top):
		pick(0)
	case key.Matches(msg, k.Bottom):
		pick(len(order) - 1)
	case key.Matches(msg, k.Left, k.Right):
		if cur < 0 {
			pick(0)
			return true
		}
		v := g.vs[order[cur]]
		d := 1
		if key.Matches(msg, k.Left) {
			d = -1
		}
		for l := v.layer + d; l >= 0 && l < len(g.layers); l += d {
			best, bestD := -1, 1<<30
			for _, u := range g.layers[l] {
				if g.vs[u].key != "" && abs(g.vs[u].row-v.row) < bestD {
					best, bestD = u, abs(g.vs[u].row-v.row)
				}
			}
			if best >= 0 {
				m.selectKey(g.vs[best].task())
				break
			}
		}
	default:
		return false
	}
	return true
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// View renders the summary, the pane tabs and the pane.
func (m *runDetail) View() string {
	st := m.Styles
	if m.run == nil {
		msg := "loading run " + m.id + "…"
		if m.id == "" {
			msg = "no run selected: open one from the runs screen (enter) or with :run ID"
		}
		return fill(st.Subtle.Render(msg), m.Width, m.Height)
	}
	var b strings.Builder
	b.WriteString(m.summary())
	b.WriteByte('\n')
	tabs := make([]string, numPanes)
	for i, n := range paneNames {
		if i == m.pane {
			tabs[i] = st.NavActive.Render("[" + n + "]")
		} else {
			tabs[i] = " " + n + " "
		}
	}
	b.WriteString(strings.Join(tabs, " ") + st.Subtle.Render("   tab switches pane"))
	b.WriteByte('\n')
	h := m.bodyHeight()
	switch m.pane {
	case paneTasks:
		b.WriteString(m.tasksView(h))
	case paneGraph:
		b.WriteString(m.graphView(h))
	case paneTimeline:
		b.WriteString(m.timeline.View())
	case paneJSON:
		b.WriteString(m.json.View())
	}
	return fill(b.String(), m.Width, m.Height)
}

func (m *runDetail) summary() string {
	st, r, now := m.Styles, m.run, m.Now()
	l1 := st.Title.Render("Run "+r.ID) + "  " + r.Workflow + "  " + st.State(string(r.State)) + "  " + st.Bar(r.Done, r.TaskCount, 20)
	l2 := "created " + stamp(now, r.CreatedAt) + " · started " + stamp(now, r.StartedAt) + " · finished " +
		stamp(now, r.FinishedAt) + " · took " + span(now, r.StartedAt, r.FinishedAt)
	l3 := "parent " + dash(shortID(r.ParentID)) + " · replay of " + dash(shortID(r.ReplayOf)) + " · on failure " +
		dash(r.OnFailure) + " · labels " + dash(labels(r.Labels)) + " · paused queues " + dash(strings.Join(r.PausedQueues, ","))
	reason := ""
	switch {
	case r.Reason != "":
		reason = st.Error.Render("reason: " + oneLine(r.Reason, m.Width-10))
	case len(r.WaitingForWorker) > 0:
		// Computed by the leader from live claims (run.get), not stored.
		reason = st.Warn.Render("⚠ waiting for a worker: no worker claims type " + strings.Join(r.WaitingForWorker, ", ") +
			" (start one with flowd worker run --type " + r.WaitingForWorker[0] + ")")
	case len(r.WaitingOn) > 0:
		reason = st.Warn.Render(waitingOnLine(r.WaitingOn[0]))
	}
	return fit(l1, m.Width) + "\n" + fit(l2, m.Width) + "\n" + fit(l3, m.Width) + "\n" + reason
}

// taskColumns: a narrow terminal drops the lease first (only running
// tasks have one, and the task screen shows it), then the queue, the
// attempt and the type; the key keeps room for a real name, and the
// duration and a worker's name are never cut to make room for it.
var taskColumns = []column{
	{Title: "KEY", Min: 18, Flex: 2},
	{Title: "TYPE", Min: 8, Flex: 1, Drop: 2},
	{Title: "STATE", Width: 11},
	{Title: "ATTEMPT", Width: 7, Right: true, Drop: 3},
	{Title: "QUEUE", Min: 8, Flex: 1, Drop: 4},
	{Title: "WORKER", Min: 12, Flex: 1, Drop: 1},
	{Title: "LEASE", Width: 8, Right: true, Drop: 5},
	{Title: "DURATION", Width: 8, Right: true},
}

func (m *runDetail) tasksView(h int) string {
	st, now := m.Styles, m.Now()
	t := newTable(st, taskColumns, m.Width)
	from, to := m.tasks.visible()
	return withFinallyRule(st, t.render(m.tasks, h, "this run has no tasks", func(i int) []string {
		tk := &m.run.Tasks[i]
		attempt := "-"
		if tk.Attempt > 0 {
			attempt = itoa(tk.Attempt) + "/" + itoa(tk.MaxAttempts)
		}
		return []string{tk.Key, tk.Type, st.State(string(tk.State)), attempt, tk.Queue, dash(tk.Worker),
			leaseLeft(now, tk), m.taskDuration(now, tk)}
	}), m.firstFin, from, to, m.Width)
}

// taskRows is how many tasks the table shows (one row less for the
// finally rule when the run has finally tasks).
func (m *runDetail) taskRows() int {
	if m.run != nil && m.firstFin >= 0 {
		return m.bodyHeight() - 2
	}
	return m.bodyHeight() - 1
}

// graphClipped reports whether the graph does not fit the pane (h rows):
// then its last row says what lies beyond each edge.
func (m *runDetail) graphClipped(h int) bool {
	if len(m.drawing.lines) > h || m.gx > 0 {
		return true
	}
	for _, b := range m.drawing.boxes {
		if b.x+b.w > m.Width {
			return true
		}
	}
	return false
}

// graphRows is how many rows of the graph the pane shows.
func (m *runDetail) graphRows() int {
	h := m.bodyHeight()
	if h > 1 && m.graphClipped(h) {
		return h - 1
	}
	return h
}

func (m *runDetail) graphView(h int) string {
	if m.graph == nil || len(m.drawing.lines) == 0 {
		return m.Styles.Subtle.Render("  no tasks to draw")
	}
	st, lines, w := m.Styles, m.drawing.lines, m.Width
	rows := h
	clipped := h > 1 && m.graphClipped(h)
	if clipped {
		rows = h - 1
	}
	from := min(m.gy, len(lines))
	to := min(len(lines), from+rows)
	left, right := "←", "→"
	if st.ASCII {
		left, right = "<", ">"
	}
	out := make([]string, 0, h)
	for _, l := range lines[from:to] {
		cut := ansi.Cut(l, m.gx, m.gx+w)
		if w > 2 && ansi.StringWidth(l) > m.gx+w { // the row goes on to the right
			cut = ansi.Cut(l, m.gx, m.gx+w-1) + st.Subtle.Render(right)
		}
		if w > 2 && m.gx > 0 && strings.TrimSpace(ansi.Strip(ansi.Cut(l, 0, m.gx))) != "" { // and came from the left
			cut = st.Subtle.Render(left) + ansi.Cut(cut, 1, w)
		}
		out = append(out, cut)
	}
	if clipped {
		for len(out) < rows {
			out = append(out, "")
		}
		out = append(out, m.graphEdges(from, to))
	}
	return strings.Join(out, "\n")
}

// graphEdges is the graph pane's last row when the graph is clipped: how
// many tasks (a group counts once) lie above, below, left and right of the
// view, and the keys that scroll to them.
func (m *runDetail) graphEdges(from, to int) string {
	var up, down, left, right int
	for _, b := range m.drawing.boxes {
		switch {
		case b.row < from:
			up++
		case b.row >= to:
			down++
		case b.x < m.gx:
			left++
		case b.x+b.w > m.gx+m.Width:
			right++
		}
	}
	arrows := [4]string{"↑", "↓", "←", "→"}
	if m.Styles.ASCII {
		arrows = [4]string{"^", "v", "<", ">"}
	}
	var parts []string
	for i, n := range [4]int{up, down, left, right} {
		if n > 0 {
			parts = append(parts, arrows[i]+" "+itoa(n)+" more "+[4]string{"above", "below", "left", "right"}[i])
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fit(m.Styles.Subtle.Render(" "+strings.Join(parts, " · ")+"  (j/k h/l move)"), m.Width)
}
