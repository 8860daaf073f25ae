package tui

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Messages of the runs screen.

// runsCmdMsg carries a command of the screen's own out of Back (which
// returns none): the root routes it back here, and it is run.
type runsCmdMsg struct{ cmd tea.Cmd }

// runsPageMsg is the answer to one run.list call.
type runsPageMsg struct {
	gen     int
	cursor  string // the request's cursor ("" = from the top)
	replace bool   // the page replaces everything loaded (a resync)
	res     *rpc.ListResult
	err     error
}

// The runs screen: tabs by state, a server-paged list, live rows.
//
// rows is a prefix of the tab's server order (newest first: run ids are
// UUIDv7, so descending id order). The screen loads only what is on screen
// plus a margin and extends the prefix as the cursor approaches its end.
// Events mark runs dirty; at most one run.list is in flight, and each one
// re-reads the smallest window of the prefix covering every dirty row (see
// plan), merged by id range (mergePage). Filtering and non-default sorts
// need the whole tab, so they load every page (1000 at a time).
type runsModel struct {
	Common
	outbox
	active bool

	tab    int // 0 = all, else domain.RunStates[tab-1]
	rows   []rpc.Run
	index  map[string]int
	more   bool
	next   string
	counts map[string]int
	loaded bool

	view  []int // indices into rows after filter and sort (nil: identity)
	nav   listNav
	selID string

	marked marks // runs marked for a bulk action (bulk.go), cleared with the tab

	filter lineInput
	query  string
	hay    map[string]hayEntry // lower-cased filter text per run
	// selector is the label selector run.list is asked with: the query,
	// when it is one (asSelector); selErr is why a query that looks like
	// one is not (the last valid selector stays).
	selector string
	selErr   string
	sortBy   int
	asc      bool

	gen       int
	inflight  bool
	dirty     map[string]bool
	headDirty bool
	wantAll   bool
	goBottom  bool
}

// sortKeys are the sort orders; 0 is the server's (newest first).
var sortKeys = []string{"created", "workflow", "state", "duration", "progress"}

func newRuns(c Common) *runsModel {
	return &runsModel{Common: c, index: map[string]int{}, dirty: map[string]bool{}, counts: map[string]int{}, marked: marks{}}
}

// Title is the screen name.
func (m *runsModel) Title() string { return "Runs" }

// tabState is the state filter of the current tab.
func (m *runsModel) tabState() domain.RunState {
	if m.tab == 0 {
		return ""
	}
	return domain.RunStates[m.tab-1]
}

// listHeight is the number of table rows on screen.
func (m *runsModel) listHeight() int { return max(m.Height-3, 1) }

// SetSize re-lays out the list.
func (m *runsModel) SetSize(w, h int) {
	m.Common.SetSize(w, h)
	m.nav.set(m.length(), m.listHeight())
}

// ShortHelp implements help.KeyMap.
func (m *runsModel) ShortHelp() []key.Binding {
	k := m.Keys
	return []key.Binding{k.Open, k.Filter, k.Right, k.Sort, k.Cancel, k.Help, k.Quit}
}

// FullHelp implements help.KeyMap.
func (m *runsModel) FullHelp() [][]key.Binding {
	k := m.Keys
	return [][]key.Binding{k.nav(), {k.Open, k.Filter, k.Left, k.Right, k.Sort, k.Reverse, k.Mark, k.MarkAll}, k.runActions(), k.global()}
}

// Capturing reports whether the filter input has the keys.
func (m *runsModel) Capturing() bool { return m.filter.active }

// Back clears the marks, then a filter; false lets the root go back.
func (m *runsModel) Back() bool {
	if len(m.marked) > 0 {
		clear(m.marked)
		return true
	}
	if m.query != "" {
		if cmd := m.setQuery(""); cmd != nil {
			m.post(runsCmdMsg{cmd}) // a cleared selector reloads the list
		}
		return true
	}
	return false
}

// Focus is called when the screen becomes visible.
func (m *runsModel) Focus() tea.Cmd {
	m.active = true
	if !m.loaded {
		return m.reload()
	}
	return m.plan()
}

// Blur is called when the screen is hidden.
func (m *runsModel) Blur() { m.active = false }

// selected returns the run under the cursor.
func (m *runsModel) selected() (rpc.Run, bool) {
	if m.nav.n == 0 {
		return rpc.Run{}, false
	}
	return m.rows[m.rowAt(m.nav.cursor)], true
}

func (m *runsModel) length() int {
	if m.view != nil {
		return len(m.view)
	}
	return len(m.rows)
}

func (m *runsModel) rowAt(i int) int {
	if m.view != nil {
		return m.view[i]
	}
	return i
}

// Update handles keys, pages and events.
func (m *runsModel) Update(msg tea.Msg) (*runsModel, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		return m, m.key(msg)
	case runsPageMsg:
		return m, m.page(msg)
	case runsCmdMsg:
		return m, msg.cmd
	case eventsMsg:
		m.events(msg.Events)
		if msg.Resync {
			return m, m.resync()
		}
		return m, m.plan()
	case resyncMsg:
		return m, m.resync()
	case bulkDoneMsg:
		clear(m.marked)
		if msg.firstErr != nil {
			return m, errorCmd(fmt.Errorf("%s (%s)", msg.summary(), msg.firstErr))
		}
		text := msg.summary()
		return m, func() tea.Msg { return toastMsg{text} }
	}
	return m, nil
}

func (m *runsModel) key(msg tea.KeyMsg) tea.Cmd {
	k := m.Keys
	if m.filter.active {
		switch m.filter.update(msg) {
		case inputSubmit:
			m.filter.stop()
		case inputCancel:
			m.filter.stop()
			m.setQuery("")
			return nil
		}
		return m.setQuery(m.filter.Value())
	}
	if m.nav.key(k, msg) {
		if key.Matches(msg, k.Bottom) && m.more {
			m.goBottom, m.wantAll = true, true
		}
		m.selID = m.selRowID()
		return m.extend()
	}
	switch {
	case key.Matches(msg, k.Open):
		if r, ok := m.selected(); ok {
			m.post(openRunMsg{id: r.ID})
		}
	case key.Matches(msg, k.Filter):
		m.filter.start("/", m.query)
	case key.Matches(msg, k.Right, k.NextPane):
		return m.setTab((m.tab + 1) % (len(domain.RunStates) + 1))
	case key.Matches(msg, k.Left, k.PrevPane):
		return m.setTab((m.tab + len(domain.RunStates)) % (len(domain.RunStates) + 1))
	case key.Matches(msg, k.Sort):
		m.sortBy = (m.sortBy + 1) % len(sortKeys)
		return m.resort()
	case key.Matches(msg, k.Reverse):
		m.asc = !m.asc
		return m.resort()
	case key.Matches(msg, k.Mark):
		if r, ok := m.selected(); ok {
			m.marked.toggle(r.ID)
			m.nav.move(1)
			m.selID = m.selRowID()
			return m.extend()
		}
	case key.Matches(msg, k.MarkAll):
		m.markAll()
	case key.Matches(msg, k.EditReplay):
		if r, ok := m.selected(); ok {
			return fetchEditReplay(m.Common, r.ID) // list rows may lack the input
		}
	default:
		if _, ok := verbFor(k, msg); ok && len(m.marked) > 0 {
			return m.bulkKey(msg)
		}
		if v, ok := verbFor(k, msg); ok {
			if r, ok := m.selected(); ok {
				m.post(confirmRun(m.Common, v, r))
			}
		}
	}
	return nil
}

func (m *runsModel) selRowID() string {
	if r, ok := m.selected(); ok {
		return r.ID
	}
	return ""
}

// setTab switches the state tab and loads it.
func (m *runsModel) setTab(t int) tea.Cmd {
	m.tab = t
	m.rows, m.index, m.more, m.next, m.view = nil, map[string]int{}, false, "", nil
	clear(m.marked)
	m.nav = listNav{}
	m.selID = ""
	m.wantAll, m.goBottom = m.textQuery() != "" || m.sortBy != 0 || m.asc, false
	return m.reload()
}

// setQuery applies a filter: a label selector is sent to the server (the
// list reloads with it), any other text filters the loaded runs.
func (m *runsModel) setQuery(q string) tea.Cmd {
	m.query = strings.TrimSpace(q)
	sel, looks, err := asSelector(m.query)
	m.selErr = ""
	switch {
	case err != nil:
		m.selErr = err.Error()
	case looks || m.selector != "":
		if !looks {
			sel = ""
		}
		if sel != m.selector {
			m.selector = sel
			return m.setTab(m.tab) // the server's answer replaces the list
		}
	}
	return m.resort()
}

// textQuery is the query the loaded runs are filtered by: none while it is
// a label selector (the server filtered them).
func (m *runsModel) textQuery() string {
	if m.selector != "" && m.query == m.selector || m.selErr != "" {
		return ""
	}
	return m.query
}

// asSelector reports whether a filter is a label selector: it holds '=' or
// starts with '!', and no key or value holds a space (then it is words,
// "wf-3 n=5", for the text filter). A selector that does not parse says why.
func asSelector(q string) (string, bool, error) {
	if !strings.Contains(q, "=") && !strings.HasPrefix(q, "!") {
		return "", false, nil
	}
	sel, err := domain.ParseSelector(q)
	if err != nil {
		for _, t := range strings.Split(q, ",") {
			if len(strings.Fields(strings.NewReplacer("!=", " ", "==", " ", "=", " ", "!", " ").Replace(t))) > 2 {
				return "", false, nil // words
			}
		}
		return "", true, errors.New(strings.TrimPrefix(err.Error(), domain.ErrInvalidArgument.Error()+": "))
	}
	for _, t := range sel {
		if strings.ContainsFunc(t.Key+t.Value, unicode.IsSpace) {
			return "", false, nil
		}
	}
	return q, true, nil
}

// resort recomputes the view; filters and sorts need every page.
func (m *runsModel) resort() tea.Cmd {
	m.wantAll = m.wantAll || m.textQuery() != "" || m.sortBy != 0 || m.asc
	m.refresh()
	return m.extend()
}

// reload fetches the tab from the top, replacing what is loaded.
func (m *runsModel) reload() tea.Cmd {
	m.gen++
	m.inflight = true
	m.dirty, m.headDirty = map[string]bool{}, false
	return m.fetch("", m.pageSize(), true)
}

func (m *runsModel) resync() tea.Cmd {
	if !m.active {
		m.loaded = false // reload on focus
		return nil
	}
	return m.reload()
}

func (m *runsModel) pageSize() int { return max(m.listHeight()*2+20, 50) }

// fetch is the one place the screen calls run.list.
func (m *runsModel) fetch(cursor string, limit int, replace bool) tea.Cmd {
	client, gen, state, sel := m.Client, m.gen, m.tabState(), m.selector
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.RunList(cx, rpc.ListParams{State: state, Limit: min(limit, 1000), Cursor: cursor, Selector: sel})
		return runsPageMsg{gen: gen, cursor: cursor, replace: replace, res: res, err: err}
	}
}

// page merges an answer.
func (m *runsModel) page(msg runsPageMsg) tea.Cmd {
	if msg.gen != m.gen {
		return nil // for a tab no longer shown
	}
	m.inflight = false
	if msg.err != nil {
		return errorCmd(msg.err)
	}
	res := msg.res
	m.counts = res.Counts
	if msg.replace {
		m.rows, m.more, m.next = res.Runs, res.NextCursor != "", res.NextCursor
	} else {
		m.rows, m.more, m.next = mergePage(m.rows, msg.cursor, res.Runs, res.NextCursor, m.more, m.next)
	}
	m.loaded = true
	m.index = make(map[string]int, len(m.rows))
	for i, r := range m.rows {
		m.index[r.ID] = i
	}
	m.refresh()
	if cmd := m.plan(); cmd != nil {
		return cmd
	}
	return m.extend()
}

// mergePage puts page (the runs after cursor, in server order) into rows
// (a prefix of the same order): rows at or above cursor stay, rows the page
// covers are replaced, and rows below the page's last id stay unless the
// page reached the end of the list.
func mergePage(rows []rpc.Run, cursor string, page []rpc.Run, pageNext string, more bool, next string) ([]rpc.Run, bool, string) {
	out := make([]rpc.Run, 0, len(rows)+len(page))
	i := 0
	if cursor != "" {
		for i < len(rows) && rows[i].ID >= cursor {
			i++
		}
		out = append(out, rows[:i]...)
	}
	out = append(out, page...)
	if pageNext == "" || len(page) == 0 {
		return out, false, ""
	}
	last := page[len(page)-1].ID
	for i < len(rows) && rows[i].ID >= last {
		i++
	}
	if i == len(rows) {
		return out, true, pageNext
	}
	return append(out, rows[i:]...), more, next
}

// events marks the runs that changed.
func (m *runsModel) events(evs []rpc.Event) {
	for _, e := range evs {
		if e.RunID == "" {
			continue
		}
		_, loaded := m.index[e.RunID]
		switch {
		case e.Kind == "run":
			m.dirty[e.RunID] = true
			m.headDirty = true // counts changed
		case loaded:
			m.dirty[e.RunID] = true // progress, paused queues
		}
	}
}

// plan fetches the window of rows covering every dirty run (one call).
func (m *runsModel) plan() tea.Cmd {
	if !m.active || m.inflight || !m.loaded || (len(m.dirty) == 0 && !m.headDirty) {
		return nil
	}
	lo, hi, extra := -1, -1, 0
	var covered []string
	for id := range m.dirty {
		i, ok := m.index[id]
		if !ok {
			// Not loaded: where would it go? Beyond the prefix: not ours.
			i = sort.Search(len(m.rows), func(j int) bool { return m.rows[j].ID < id })
			if i == len(m.rows) && m.more {
				delete(m.dirty, id)
				continue
			}
			extra++
		}
		if lo < 0 || i < lo {
			lo = i
		}
		hi = max(hi, i)
		covered = append(covered, id)
	}
	if lo < 0 {
		lo, hi = 0, 0 // only the counts changed
	}
	span := min(hi-lo+1+extra+2, 1000)
	for _, id := range covered {
		if i, ok := m.index[id]; !ok || i < lo+span {
			delete(m.dirty, id)
		}
	}
	m.headDirty = false
	m.inflight = true
	cursor := ""
	if lo > 0 {
		cursor = m.rows[lo-1].ID
	}
	return m.fetch(cursor, span, false)
}

// extend loads the next page when the cursor nears the end of what is
// loaded (or every page, for a filter or a sort).
func (m *runsModel) extend() tea.Cmd {
	if !m.more || m.inflight || !m.loaded {
		return nil
	}
	if !m.wantAll && m.nav.cursor < m.length()-m.listHeight() {
		return nil
	}
	m.inflight = true
	limit := m.pageSize()
	if m.wantAll {
		limit = 1000
	}
	return m.fetch(m.rows[len(m.rows)-1].ID, limit, false)
}

// refresh recomputes the view and keeps the selected run under the cursor.
func (m *runsModel) refresh() {
	m.view = nil
	if m.textQuery() != "" || m.sortBy != 0 || m.asc {
		m.view = make([]int, 0, len(m.rows))
		words := strings.Fields(strings.ToLower(m.textQuery()))
		for i := range m.rows {
			if matchWords(m.haystack(&m.rows[i]), words) {
				m.view = append(m.view, i)
			}
		}
		if m.sortBy != 0 || m.asc {
			now := m.Now()
			slices.SortStableFunc(m.view, func(a, b int) int {
				c := compareRuns(&m.rows[a], &m.rows[b], sortKeys[m.sortBy], now)
				if m.asc {
					return c
				}
				return -c
			})
		}
	}
	m.nav.set(m.length(), m.listHeight())
	if m.selID != "" {
		for i := range m.length() {
			if m.rows[m.rowAt(i)].ID == m.selID {
				m.nav.to(i)
				break
			}
		}
	}
	if m.goBottom && !m.more {
		m.goBottom = false
		m.nav.to(m.nav.n - 1)
	}
	m.selID = m.selRowID()
}

// hayEntry caches what the filter matches for one run, valid while the
// run is unchanged (its modify index and state).
type hayEntry struct {
	mi    uint64
	state domain.RunState
	text  string
}

func (m *runsModel) haystack(r *rpc.Run) string {
	if m.hay == nil || len(m.hay) > 4*len(m.rows)+1000 {
		m.hay = make(map[string]hayEntry, len(m.rows))
	}
	if e, ok := m.hay[r.ID]; ok && e.mi == r.ModifyIndex && e.state == r.State {
		return e.text
	}
	text := strings.ToLower(r.ID + " " + r.Workflow + " " + string(r.State) + " " + labels(r.Labels))
	m.hay[r.ID] = hayEntry{mi: r.ModifyIndex, state: r.State, text: text}
	return text
}

func matchWords(hay string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(hay, w) {
			return false
		}
	}
	return true
}

func compareRuns(a, b *rpc.Run, by string, now time.Time) int {
	switch by {
	case "workflow":
		return cmp.Or(strings.Compare(a.Workflow, b.Workflow), strings.Compare(a.ID, b.ID))
	case "state":
		return cmp.Or(cmp.Compare(slices.Index(domain.RunStates, a.State), slices.Index(domain.RunStates, b.State)), strings.Compare(a.ID, b.ID))
	case "duration":
		return cmp.Or(cmp.Compare(runDuration(a, now), runDuration(b, now)), strings.Compare(a.ID, b.ID))
	case "progress":
		return cmp.Or(cmp.Compare(progress(a), progress(b)), strings.Compare(a.ID, b.ID))
	}
	return strings.Compare(a.ID, b.ID)
}

func runDuration(r *rpc.Run, now time.Time) time.Duration {
	if r.StartedAt.IsZero() {
		return 0
	}
	end := r.FinishedAt
	if end.IsZero() {
		end = now
	}
	return end.Sub(r.StartedAt)
}

func progress(r *rpc.Run) float64 {
	if r.TaskCount == 0 {
		return 0
	}
	return float64(r.Done) / float64(r.TaskCount)
}

// runColumns are the list's columns; narrow terminals drop the labels and
// the start time and shorten the progress bar.
func runColumns(width int) ([]column, int) {
	if width < 100 {
		return []column{{Title: "ID", Width: 12}, {Title: "WORKFLOW", Min: 8, Flex: 1}, {Title: "STATE", Width: 13},
			{Title: "PROGRESS", Width: 14}, {Title: "DURATION", Width: 8, Right: true}}, 6
	}
	return []column{{Title: "ID", Width: 12}, {Title: "WORKFLOW", Min: 10, Flex: 2}, {Title: "STATE", Width: 13},
		{Title: "PROGRESS", Width: 20}, {Title: "STARTED", Width: 10}, {Title: "DURATION", Width: 8, Right: true},
		{Title: "LABELS", Min: 6, Flex: 3}}, 10
}

// View renders tabs, the status line and the visible rows. Its cost does
// not depend on how many runs are loaded.
func (m *runsModel) View() string {
	st := m.Styles
	var b strings.Builder
	b.WriteString(m.tabsView())
	b.WriteByte('\n')
	b.WriteString(m.statusView())
	b.WriteByte('\n')
	cols, barW := runColumns(m.Width)
	t := newTable(st, cols, m.Width)
	if len(m.marked) > 0 {
		t.marked = func(i int) bool { return m.marked[m.rows[m.rowAt(i)].ID] }
	}
	narrow := len(cols) < 7
	now := m.Now()
	empty := "no runs"
	if !m.loaded {
		empty = "loading…"
	} else if m.query != "" {
		empty = "no run matches the filter"
		if m.selector != "" && m.textQuery() == "" {
			empty = "no run matches the selector"
		}
	}
	b.WriteString(t.render(m.nav, m.Height-2, empty, func(i int) []string {
		r := &m.rows[m.rowAt(i)]
		started := "-"
		if !r.StartedAt.IsZero() {
			started = ago(now, r.StartedAt)
		}
		if narrow {
			return []string{shortID(r.ID), r.Workflow, st.State(string(r.State)), st.Bar(r.Done, r.TaskCount, barW),
				span(now, r.StartedAt, r.FinishedAt)}
		}
		return []string{shortID(r.ID), r.Workflow, st.State(string(r.State)), st.Bar(r.Done, r.TaskCount, barW),
			started, span(now, r.StartedAt, r.FinishedAt), labels(r.Labels)}
	}))
	return b.String()
}

func (m *runsModel) tabsView() string {
	st := m.Styles
	total := 0
	for _, n := range m.counts {
		total += n
	}
	// Long form ("● running 12") when it fits, else glyph and count only
	// for the tabs not selected.
	for _, short := range []bool{false, true} {
		parts := make([]string, 0, len(domain.RunStates)+1)
		label := func(i int, glyph, word string, n int) string {
			text := glyph + " " + word + " " + itoa(n)
			if i == 0 {
				text = word + " " + itoa(n)
			}
			if i == m.tab {
				return st.NavActive.Render("[" + text + "]")
			}
			if short && i > 0 {
				text = glyph + " " + itoa(n)
			}
			return text
		}
		parts = append(parts, label(0, "", "all", total))
		for i, s := range domain.RunStates {
			parts = append(parts, label(i+1, stateGlyph(string(s)), string(s), m.counts[string(s)]))
		}
		line := strings.Join(parts, " ")
		if ansi.StringWidth(line) <= m.Width || short {
			return fit(line, m.Width)
		}
	}
	return ""
}

func (m *runsModel) statusView() string {
	st := m.Styles
	if m.filter.active {
		return m.filter.View(st)
	}
	var parts []string
	dir := "↓"
	if m.asc {
		dir = "↑"
	}
	parts = append(parts, "sort "+sortKeys[m.sortBy]+" "+dir)
	if n := len(m.marked); n > 0 {
		parts = append(parts, itoa(n)+" selected (c cancel, R retry, esc clear)")
	}
	switch {
	case m.selErr != "":
		parts = append(parts, "selector: "+m.selErr)
	case m.textQuery() != "":
		parts = append(parts, "filter \""+m.query+"\" ("+itoa(len(m.view))+" match)")
	}
	if m.selector != "" {
		parts = append(parts, "selector \""+m.selector+"\" (server)")
	}
	total := m.counts[string(m.tabState())]
	if m.tab == 0 {
		total = 0
		for _, n := range m.counts {
			total += n
		}
	}
	if m.nav.n > 0 {
		from, to := m.nav.visible()
		parts = append(parts, "rows "+itoa(from+1)+"-"+itoa(to)+" of "+itoa(m.nav.n))
	}
	loaded := itoa(len(m.rows)) + "/" + itoa(total) + " loaded"
	if m.wantAll && m.more {
		loaded += " (loading all…)"
	}
	parts = append(parts, loaded)
	return st.Subtle.Render(fit(strings.Join(parts, " · "), m.Width))
}
