package tui

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/rpc"
)

// Messages of the queues screen.

// queuesLoadedMsg answers queue.list (and cluster.stats for the totals).
type queuesLoadedMsg struct {
	res   *rpc.QueueListResult
	stats *rpc.ClusterStats
	err   error
}

// Throughput buckets: tasks finished per queue, counted from the event
// stream (by the event's own timestamp) since the TUI started.
const (
	tputBucket  = 5 * time.Second
	tputBuckets = 24 // two minutes
)

// queuesModel lists queues with breakers, pauses and a throughput
// sparkline. queue.list is refetched when an event touches a queue (task,
// queue and breaker events), coalesced to one call in flight.
type queuesModel struct {
	Common
	outbox
	listLoad
	queues   []rpc.Queue
	breakers []rpc.Breaker
	stats    *rpc.ClusterStats
	nav      listNav
	tput     map[string]map[int64]int // queue -> bucket (unix / 5s) -> tasks finished
	// runPauses are per-run pauses seen in the event stream since the TUI
	// started (queue.list's paused_runs, when the agent fills it, adds to it).
	runPauses map[string]map[string]bool
	// leases samples each queue's lease counter (queues_rate.go).
	leases map[string]leaseSample
	// caps are the recent caps of auto queues (queues_auto.go).
	caps map[string][]int
}

func newQueues(c Common) *queuesModel {
	m := &queuesModel{Common: c, tput: map[string]map[int64]int{}, runPauses: map[string]map[string]bool{}}
	m.listLoad.read = m.fetch
	return m
}

// Title is the screen name.
func (m *queuesModel) Title() string { return "Queues" }

func (m *queuesModel) listHeight() int { return max(m.Height-6, 1) }

// SetSize re-lays out the list.
func (m *queuesModel) SetSize(w, h int) {
	m.Common.SetSize(w, h)
	m.nav.set(len(m.queues), m.listHeight())
}

// ShortHelp implements help.KeyMap.
func (m *queuesModel) ShortHelp() []key.Binding {
	k := m.Keys
	return []key.Binding{k.Up, k.Down, k.Pause, k.Help, k.Quit}
}

// FullHelp implements help.KeyMap.
func (m *queuesModel) FullHelp() [][]key.Binding {
	k := m.Keys
	return [][]key.Binding{k.nav(), {k.Pause}, k.global()}
}

// Capturing: no text input.
func (m *queuesModel) Capturing() bool { return false }

// Back never consumes esc.
func (m *queuesModel) Back() bool { return false }

// fetch reads queue.list and cluster.stats (the totals).
func (m *queuesModel) fetch() tea.Cmd {
	client := m.Client
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.QueueList(cx)
		if err != nil {
			return queuesLoadedMsg{err: err}
		}
		stats, err := client.ClusterStats(cx)
		return queuesLoadedMsg{res: res, stats: stats, err: err}
	}
}

// Update handles keys, loads and events.
func (m *queuesModel) Update(msg tea.Msg) (*queuesModel, tea.Cmd) {
	switch msg := msg.(type) {
	case queuesLoadedMsg:
		m.inflight = false
		if msg.err != nil {
			return m, errorCmd(msg.err)
		}
		sel := ""
		if m.nav.n > 0 {
			sel = m.queues[m.nav.cursor].Name
		}
		m.queues, m.breakers, m.stats, m.loaded = msg.res.Queues, msg.res.Breakers, msg.stats, true
		m.sampleLeases()
		m.sampleCaps()
		m.nav.set(len(m.queues), m.listHeight())
		if i := slices.IndexFunc(m.queues, func(q rpc.Queue) bool { return q.Name == sel }); i >= 0 {
			m.nav.to(i)
		}
		return m, m.plan()
	case eventsMsg:
		for _, e := range msg.Events {
			switch e.Kind {
			case "task", "queue", "breaker", "compensation":
				m.dirty = true
			}
			m.noteCap(e)
			if e.Kind == "queue" && e.RunID != "" && (e.Transition == "pause" || e.Transition == "resume") {
				p := m.runPauses[e.Queue]
				if p == nil {
					p = map[string]bool{}
					m.runPauses[e.Queue] = p
				}
				if e.Transition == "pause" {
					p[e.RunID] = true
				} else {
					delete(p, e.RunID)
				}
			}
			if e.Kind == "task" && e.Queue != "" && (e.To == "succeeded" || e.To == "failed") {
				b := m.tput[e.Queue]
				if b == nil {
					b = map[int64]int{}
					m.tput[e.Queue] = b
				}
				b[e.At.UnixNano()/int64(tputBucket)]++
			}
		}
		if msg.Resync {
			m.dirty = true
		}
		m.pruneTput()
		return m, m.plan()
	case resyncMsg:
		m.dirty = true
		return m, m.plan()
	case tea.KeyMsg:
		if m.nav.key(m.Keys, msg) {
			return m, nil
		}
		if key.Matches(msg, m.Keys.Pause) && m.nav.n > 0 {
			m.post(confirmQueuePause(m.Common, m.queues[m.nav.cursor]))
		}
	}
	return m, nil
}

func (m *queuesModel) pruneTput() {
	oldest := m.Now().Add(-2*tputBuckets*tputBucket).UnixNano() / int64(tputBucket)
	for _, b := range m.tput {
		maps.DeleteFunc(b, func(k int64, _ int) bool { return k < oldest })
	}
}

// series is a queue's finished tasks per bucket, oldest first, ending now.
func (m *queuesModel) series(q string) ([]int, float64) {
	b := m.tput[q]
	now := m.Now().UnixNano() / int64(tputBucket)
	out := make([]int, tputBuckets)
	sum := 0
	for i := range out {
		out[i] = b[now-int64(tputBuckets-1-i)]
		if i >= tputBuckets-12 {
			sum += out[i] // the last minute
		}
	}
	return out, float64(sum) / 60
}

// pausedRuns are the runs the queue is paused for (server list plus the
// pauses seen in the stream).
func (m *queuesModel) pausedRuns(q *rpc.Queue) []string {
	set := map[string]bool{}
	for _, r := range q.PausedRuns {
		set[r] = true
	}
	for r := range m.runPauses[q.Name] {
		set[r] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// worstBreaker summarises a queue's breakers: open beats half-open beats
// closed.
func worstBreaker(bs []rpc.Breaker) (rpc.Breaker, bool) {
	rank := map[string]int{"closed": 0, "half_open": 1, "open": 2}
	var w rpc.Breaker
	found := false
	for _, b := range bs {
		if !found || rank[b.State] > rank[w.State] {
			w, found = b, true
		}
	}
	return w, found
}

func breakerGlyph(state string) string {
	switch state {
	case "open":
		return "✗"
	case "half_open":
		return "◌"
	}
	return "✓"
}

// View renders the totals, the table and the selected queue's details.
func (m *queuesModel) View() string {
	st := m.Styles
	var b strings.Builder
	if s := m.stats; s != nil {
		b.WriteString(fit(fmt.Sprintf("cluster: %.1f tasks/s (last minute) · %d running · %d tasks done · %d lease expiries",
			s.TasksPerSecond, s.Running, s.TasksDone, s.LeaseExpiries), m.Width))
	} else {
		b.WriteString(st.Subtle.Render("loading queues…"))
	}
	b.WriteByte('\n')
	// A narrow terminal drops the sparkline first (RATE sums it up), then
	// the rate limit (the detail line below says it), then the cap; the
	// breaker column shrinks before OLDEST and RATE go.
	cols := []column{{Title: "QUEUE", Min: 8, Flex: 1}, {Title: "READY", Width: 6, Right: true},
		{Title: "RUNNING", Width: 7, Right: true}, {Title: "CAP", Width: 4, Right: true, Drop: 4},
		{Title: "LIMIT", Width: 7, Right: true, Drop: 5}, {Title: "PAUSED", Width: 12},
		{Title: "BREAKER", Min: 14, Flex: 2}, {Title: "OLDEST", Width: 8, Right: true},
		{Title: "DONE/5s (2 MIN)", Width: tputBuckets, Drop: 6}, {Title: "RATE", Width: 7, Right: true, Drop: 3}}
	t := newTable(st, cols, m.Width)
	b.WriteString(t.render(m.nav, m.listHeight()+1, "no queues yet (a queue appears with its first task)", func(i int) []string {
		q := &m.queues[i]
		capacity := capCell(q)
		paused := "-"
		switch {
		case q.Paused:
			paused = st.Paint("interrupted", "‖ paused")
		case len(m.pausedRuns(q)) > 0:
			paused = "‖ " + itoa(len(m.pausedRuns(q))) + " run(s)"
		}
		br := "-"
		if w, ok := worstBreaker(q.Breakers); ok {
			s := strings.ReplaceAll(w.State, "_", "-")
			br = st.Paint(s, breakerGlyph(w.State)+" "+s+" "+w.Type)
		}
		oldest := "-"
		if q.Ready > 0 {
			oldest = human(time.Duration(q.OldestReadyMS) * time.Millisecond)
		}
		series, rate := m.series(q.Name)
		return []string{q.Name, itoa(q.Ready), itoa(q.Running), capacity, limitCell(q), paused, br, oldest,
			st.Paint("running", st.Sparkline(series)), fmt.Sprintf("%.1f/s", rate)}
	}))
	b.WriteByte('\n')
	b.WriteString(m.detail())
	return fill(b.String(), m.Width, m.Height)
}

// detail shows the selected queue's task types and breakers.
func (m *queuesModel) detail() string {
	st := m.Styles
	if m.nav.n == 0 {
		return ""
	}
	q := m.queues[m.nav.cursor]
	var types []string
	for _, k := range slices.Sorted(maps.Keys(q.Types)) {
		types = append(types, k+"="+itoa(q.Types[k]))
	}
	var brs []string
	for _, br := range q.Breakers {
		s := breakerGlyph(br.State) + " " + br.Type + " " + strings.ReplaceAll(br.State, "_", "-") + " (" + itoa(br.Failures) + " failures"
		if !br.OpenedAt.IsZero() {
			s += ", opened " + clock(br.OpenedAt)
		}
		brs = append(brs, st.Paint(strings.ReplaceAll(br.State, "_", "-"), s+")"))
	}
	line1 := st.Title.Render("queue "+q.Name) + " · ready by type: " + dash(strings.Join(types, " ")) + m.limitDetail(q) + m.autoDetail(q)
	line2 := "breakers: " + dash(strings.Join(brs, " · "))
	if runs := m.pausedRuns(&q); len(runs) > 0 {
		for i, r := range runs {
			runs[i] = shortID(r)
		}
		line2 += " · paused for runs " + strings.Join(runs, ",")
	}
	return fit(line1, m.Width) + "\n" + fit(line2, m.Width)
}
