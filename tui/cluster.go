package tui

import (
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/rpc"
)

// The cluster screen: every endpoint of --addr probed directly with
// cluster.status (probeMsg, shared with the header), the raft
// configuration, and the leadership changes seen so far (from comparing
// successive probes: a new leader id or a higher term), and throughput
// and latency over the last minutes from the event stream (cluster_rate.go).

// leaderChange is one observed change of leadership.
type leaderChange struct {
	at       time.Time
	term     uint64
	from, to string
	seenBy   string
}

// clusterModel renders the probes; it fetches nothing itself.
type clusterModel struct {
	Common
	outbox
	nodes      []NodeStatus
	probed     time.Time
	current    string // endpoint the TUI is connected to
	history    []leaderChange
	leader     string
	term       uint64
	nav        listNav
	observed   bool
	known      map[string]string // node id -> endpoint it answered on
	rate       throughput
	backfilled bool // the chart's events.list backfill was asked for
}

func newCluster(c Common) *clusterModel { return &clusterModel{Common: c} }

// Title is the screen name.
func (m *clusterModel) Title() string { return "Cluster" }

// SetSize re-lays out the tables.
func (m *clusterModel) SetSize(w, h int) {
	m.Common.SetSize(w, h)
	m.nav.set(len(m.nodes), max(len(m.nodes), 1))
}

// ShortHelp implements help.KeyMap.
func (m *clusterModel) ShortHelp() []key.Binding {
	k := m.Keys
	return []key.Binding{k.Up, k.Down, k.Help, k.Quit}
}

// FullHelp implements help.KeyMap.
func (m *clusterModel) FullHelp() [][]key.Binding {
	return [][]key.Binding{m.Keys.nav(), m.Keys.global()}
}

// Capturing: no text input.
func (m *clusterModel) Capturing() bool { return false }

// Back never consumes esc.
func (m *clusterModel) Back() bool { return false }

// Focus: the probes arrive on their own; the chart backfills once.
func (m *clusterModel) Focus() tea.Cmd { return m.backfillCmd() }

// Blur is called when the screen is hidden.
func (m *clusterModel) Blur() {}

// Update records probes and leadership changes.
func (m *clusterModel) Update(msg tea.Msg) (*clusterModel, tea.Cmd) {
	switch msg := msg.(type) {
	case probeMsg:
		m.nodes, m.probed = msg.nodes, msg.at
		if m.known == nil {
			m.known = map[string]string{}
		}
		for _, n := range msg.nodes {
			if n.Status != nil {
				m.known[n.Status.NodeID] = n.Endpoint
			}
		}
		m.nav.set(len(m.nodes), max(len(m.nodes), 1))
		m.observe(msg)
	case eventsMsg:
		m.rate.stream(msg.Events, m.Now())
	case rateBackfillMsg:
		if msg.err != nil {
			m.backfilled = false // try again next time
			return m, errorCmd(msg.err)
		}
		m.rate.backfill(msg.evs, m.Now())
	case connMsg:
		if msg.State == connLive {
			m.current = msg.Endpoint
		}
	case tea.KeyMsg:
		m.nav.key(m.Keys, msg)
	}
	return m, nil
}

// observe compares the freshest view of leadership with the last one.
func (m *clusterModel) observe(p probeMsg) {
	var best *rpc.ClusterStatus
	for _, n := range p.nodes {
		if s := n.Status; s != nil && s.LeaderID != "" && (best == nil || s.Term > best.Term) {
			best = s
		}
	}
	if best == nil {
		return
	}
	if !m.observed || best.LeaderID != m.leader || best.Term > m.term {
		if !m.observed || best.LeaderID != m.leader {
			m.history = append(m.history, leaderChange{at: p.at, term: best.Term, from: m.leader, to: best.LeaderID, seenBy: best.NodeID})
			if len(m.history) > 50 {
				m.history = m.history[len(m.history)-50:]
			}
		}
		m.leader, m.term, m.observed = best.LeaderID, best.Term, true
	}
}

// nodeState is a node's role with a glyph.
func nodeState(n NodeStatus) (glyph, word, color string) {
	if n.Status == nil {
		return "✗", "unreachable", "unreachable"
	}
	switch s := strings.ToLower(n.Status.State); s {
	case "leader":
		return "★", s, "leader"
	case "follower":
		return "●", s, "follower"
	case "candidate":
		return "…", s, "candidate"
	default:
		return "?", dash(s), "pending"
	}
}

// View renders nodes, peers and leadership history.
func (m *clusterModel) View() string {
	st, now := m.Styles, m.Now()
	var b strings.Builder
	if m.probed.IsZero() {
		return fill(st.Subtle.Render("probing the endpoints of --addr…"), m.Width, m.Height)
	}
	var maxApplied uint64
	for _, n := range m.nodes {
		if n.Status != nil {
			maxApplied = max(maxApplied, n.Status.AppliedIndex)
		}
	}
	probed := "just now"
	if d := now.Sub(m.probed); d >= time.Second {
		probed = human(d) + " ago"
	}
	b.WriteString(st.Title.Render("Nodes") + st.Subtle.Render("  (every endpoint of --addr, probed every 2s; * = connected; probed "+
		probed+")") + "\n")
	epw := 8
	for _, n := range m.nodes {
		epw = max(epw, len(strings.TrimPrefix(n.Endpoint, "unix://"))+2)
	}
	cols := []column{{Title: "ENDPOINT", Width: min(epw, 40)}, {Title: "NODE", Width: 6}, {Title: "STATE", Width: 13},
		{Title: "TERM", Width: 5, Right: true}, {Title: "LEADER", Width: 6}, {Title: "COMMIT", Width: 8, Right: true},
		{Title: "APPLIED", Width: 8, Right: true}, {Title: "LAG", Width: 5, Right: true}, {Title: "CONTACT", Width: 9},
		{Title: "RTT", Width: 6, Right: true}, {Title: "VERSION", Width: 8}, {Title: "ERROR", Min: 6, Flex: 2}}
	t := newTable(st, cols, m.Width)
	b.WriteString(t.render(m.nav, len(m.nodes)+1, "", func(i int) []string {
		n := m.nodes[i]
		g, word, color := nodeState(n)
		ep := strings.TrimPrefix(n.Endpoint, "unix://")
		if n.Endpoint == m.current {
			ep = "* " + ep
		}
		if n.Status == nil {
			node := "-"
			for id, e := range m.known {
				if e == n.Endpoint {
					node = id
				}
			}
			return []string{ep, node, st.Paint(color, g+" "+word), "-", "-", "-", "-", "-", "-", "-", "-", oneLine(errText(n.Err), 200)}
		}
		s := n.Status
		return []string{ep, s.NodeID, st.Paint(color, g+" "+word), utoa(s.Term), dash(s.LeaderID), utoa(s.CommitIndex),
			utoa(s.AppliedIndex), utoa(maxApplied - s.AppliedIndex), contact(s.LastContact), rtt(n.RTT), dash(s.Version), ""}
	}))
	b.WriteString("\n\n" + m.rateView())
	b.WriteString("\n\n" + st.Title.Render("Raft configuration") + "\n")
	b.WriteString(m.peersView())
	b.WriteString("\n\n" + st.Title.Render("Leadership changes") + st.Subtle.Render("  (newest first, since the TUI started)") + "\n")
	if len(m.history) == 0 {
		b.WriteString("  " + st.Subtle.Render("no leader seen yet"))
	}
	for i := len(m.history) - 1; i >= 0; i-- {
		c := m.history[i]
		line := clock(c.at) + "  term " + utoa(c.term) + "  "
		if c.from == "" {
			line += "leader " + c.to + " (first seen, reported by " + c.seenBy + ")"
		} else {
			line += "leader " + c.from + " → " + c.to + " (reported by " + c.seenBy + ")"
		}
		b.WriteString("  " + line + "\n")
	}
	return fill(b.String(), m.Width, m.Height)
}

// peersView lists the raft configuration as the best-informed node sees it.
func (m *clusterModel) peersView() string {
	st := m.Styles
	var src *rpc.ClusterStatus
	reached := map[string]bool{}
	for _, n := range m.nodes {
		if s := n.Status; s != nil {
			reached[s.NodeID] = true
			if src == nil || s.Term > src.Term || (s.Term == src.Term && s.NodeID == s.LeaderID) {
				src = s
			}
		}
	}
	if src == nil {
		return "  " + st.Subtle.Render("no node answered")
	}
	peers := slices.Clone(src.Peers)
	slices.SortFunc(peers, func(a, b rpc.Peer) int { return strings.Compare(a.ID, b.ID) })
	cols := []column{{Title: "ID", Width: 8}, {Title: "ADDRESS", Min: 12, Flex: 2}, {Title: "SUFFRAGE", Width: 9},
		{Title: "ROLE", Width: 10}, {Title: "PROBE", Min: 10, Flex: 2}}
	t := newTable(st, cols, m.Width)
	lines := []string{t.header()}
	for _, p := range peers {
		probe := st.Paint("live", "✓ answers")
		switch {
		case reached[p.ID]:
		case m.known[p.ID] != "":
			probe = st.Paint("unreachable", "✗ unreachable at "+strings.TrimPrefix(m.known[p.ID], "unix://"))
		default:
			probe = st.Paint("pending", "? not probed (not in --addr, or never answered)")
		}
		lines = append(lines, t.row([]string{p.ID, p.Address, p.Suffrage, dash(p.State), probe}, false))
	}
	return strings.Join(lines, "\n")
}

// contact formats raft's last-contact duration ("2.628617ms" -> "2ms").
func contact(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil {
		return dash(s)
	}
	if d == 0 {
		return "0"
	}
	return human(d)
}

func rtt(d time.Duration) string {
	if d < time.Millisecond {
		return "<1ms"
	}
	return human(d)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
