package tui

import (
	"context"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/flowd/flowd/rpc"
)

// Messages of the header and footer.

// probeTickMsg starts a probe of every endpoint; only the latest chain of
// ticks (gen) probes, so extra probes (reconnect, ctrl+r) never multiply
// the periodic ones.
type probeTickMsg struct{ gen int }

// probeMsg is the result of probing every endpoint (cluster.status each).
type probeMsg struct {
	nodes []NodeStatus
	at    time.Time
}

// probeEvery is the one periodic read of the TUI: cluster.status has no
// events (terms, commit indexes, peer health), so the header re-reads it.
const probeEvery = 2 * time.Second

// header shows the connection and the cluster's health on every screen:
// node, leader, term, commit/applied index, peers up, live indicator; and
// the screen tabs under it.
type header struct {
	Common
	prober Prober
	eps    []string
	conn   connMsg
	nodes  []NodeStatus
	known  map[string]string // endpoint -> node id, from past probes
	frozen bool
	gen    int // of the pending probe tick
}

func newHeader(c Common, p Prober, endpoints []string) *header {
	return &header{Common: c, prober: p, eps: endpoints, known: map[string]string{},
		conn: connMsg{State: connConnecting, Endpoint: first(endpoints)}}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// Init probes at once.
func (h *header) Init() tea.Cmd { return h.probe() }

func (h *header) probe() tea.Cmd {
	if h.prober == nil {
		return nil
	}
	p, now := h.prober, h.Now
	return func() tea.Msg {
		cx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		nodes := p.Probe(cx)
		return probeMsg{nodes: nodes, at: now()}
	}
}

// Update records probes and connection changes.
func (h *header) Update(msg tea.Msg) (*header, tea.Cmd) {
	switch msg := msg.(type) {
	case probeTickMsg:
		if msg.gen != h.gen {
			return h, nil // superseded by a later probe
		}
		return h, h.probe()
	case probeMsg:
		h.nodes = msg.nodes
		for _, n := range msg.nodes {
			if n.Status != nil {
				h.known[n.Endpoint] = n.Status.NodeID
			}
		}
		h.gen++
		gen := h.gen
		return h, tea.Tick(probeEvery, func(time.Time) tea.Msg { return probeTickMsg{gen: gen} })
	case connMsg:
		h.conn = msg
	}
	return h, nil
}

// live reports whether the stream is up.
func (h *header) live() bool { return h.conn.State == connLive }

// health counts peers: up (answered a probe), total (raft configuration,
// or the endpoints when no node answered) and unknown (in the
// configuration but never seen on any endpoint).
func (h *header) health() (up, total, unknown int) {
	seen := map[string]bool{}
	var cfg []string
	var bestTerm uint64
	for _, n := range h.nodes {
		if s := n.Status; s != nil {
			seen[s.NodeID] = true
			up++
			if s.Term >= bestTerm {
				bestTerm, cfg = s.Term, nil
				for _, p := range s.Peers {
					cfg = append(cfg, p.ID)
				}
			}
		}
	}
	if len(cfg) == 0 {
		return up, len(h.eps), 0
	}
	mapped := map[string]bool{}
	for _, id := range h.known {
		mapped[id] = true
	}
	for _, id := range cfg {
		if !seen[id] && !mapped[id] {
			unknown++
		}
	}
	return up, len(cfg), unknown
}

// View renders the status line, the screen tabs and a rule.
func (h *header) View(active screenID) string {
	st := h.Styles
	sep := st.HeaderDim.Render(" · ")
	parts := []string{st.Header.Render("flowd") + " " + h.indicator()}
	if h.ReadOnly {
		parts = append(parts, st.Warn.Render("read-only"))
	}
	var cur *NodeStatus
	for i := range h.nodes {
		if h.nodes[i].Endpoint == h.conn.Endpoint {
			cur = &h.nodes[i]
		}
	}
	node := h.conn.Node
	if node == "" {
		node = h.known[h.conn.Endpoint]
	}
	parts = append(parts, "node "+dash(node))
	s, via := h.view(cur)
	if s != nil {
		leader := "leader " + s.LeaderID
		if s.LeaderID == "" {
			leader = st.Bad.Render("leader none ✗")
		}
		idx := "commit " + utoa(s.CommitIndex) + " applied " + utoa(s.AppliedIndex)
		if h.Width < 120 {
			idx = "idx " + utoa(s.CommitIndex) + "/" + utoa(s.AppliedIndex)
		}
		parts = append(parts, leader, "term "+utoa(s.Term), idx+via)
	} else {
		parts = append(parts, st.HeaderDim.Render("leader ? · term ? · commit ? applied ?"))
	}
	up, total, unknown := h.health()
	peers := "peers " + itoa(up) + "/" + itoa(total)
	if unknown > 0 {
		peers += " (" + itoa(unknown) + " not in --addr)"
	}
	switch {
	case len(h.nodes) == 0:
		peers = st.HeaderDim.Render("peers ?/" + itoa(total))
	case up < total/2+1 && unknown == 0:
		peers = st.Bad.Render(peers + " no quorum ✗")
	case up < total && unknown == 0:
		peers = st.Warn.Render(peers)
	}
	parts = append(parts, peers, st.HeaderDim.Render(h.conn.Endpoint))
	line1 := strings.Join(parts, sep)
	return fit(line1, h.Width) + "\n" + fit(h.tabs(active), h.Width) + "\n" + st.rule(h.Width)
}

// view is the status the header shows: the connected node's own, or,
// when it does not answer, the best-informed other node's (named).
func (h *header) view(cur *NodeStatus) (*rpc.ClusterStatus, string) {
	if cur != nil && cur.Status != nil {
		return cur.Status, ""
	}
	var best *rpc.ClusterStatus
	for _, n := range h.nodes {
		if s := n.Status; s != nil && (best == nil || s.Term > best.Term || (s.Term == best.Term && s.AppliedIndex > best.AppliedIndex)) {
			best = s
		}
	}
	if best == nil {
		return nil, ""
	}
	return best, h.Styles.HeaderDim.Render(" (per " + best.NodeID + ")")
}

// indicator is live / frozen / reconnecting in Ns.
func (h *header) indicator() string {
	st := h.Styles
	switch h.conn.State {
	case connLive:
		if h.frozen {
			return st.Warn.Render("‖ frozen (f: live)")
		}
		return st.Good.Render("● live")
	case connDown:
		left := h.conn.RetryAt.Sub(h.Now())
		if left > 0 {
			secs := int((left + time.Second - 1) / time.Second)
			return st.Bad.Render("⟳ reconnecting in " + itoa(secs) + "s")
		}
		return st.Bad.Render("⟳ reconnecting…")
	}
	return st.Warn.Render("○ connecting…")
}

var screenNames = [numScreens]string{"Runs", "Run", "Task", "Queues", "Workers", "Cluster", "Events", "Schedules", "Failed"}

// shorter and shortest are the names of the tabs not shown where the full
// ones do not fit (80 columns); the active tab keeps its full name.
var (
	shorter  = [numScreens]string{"Runs", "Run", "Task", "Queues", "Workers", "Cluster", "Events", "Sched", "Failed"}
	shortest = [numScreens]string{"Runs", "Run", "Task", "Queues", "Work", "Clus", "Events", "Sched", "Failed"}
)

// tabs renders the screen tabs; when they do not fit the width (80
// columns) the inactive ones lose their padding.
func (h *header) tabs(active screenID) string {
	st := h.Styles
	render := func(padding string, names [numScreens]string) string {
		var b strings.Builder
		for i, n := range names {
			label := itoa(i+1) + " " + n
			if screenID(i) == active {
				b.WriteString(st.NavActive.Render("[" + itoa(i+1) + " " + screenNames[i] + "]"))
			} else {
				b.WriteString(st.Nav.Render(padding + label + padding))
			}
			b.WriteByte(' ')
		}
		return b.String()
	}
	if s := render(" ", screenNames); h.Width == 0 || width(s) <= h.Width {
		return s
	}
	for _, names := range [][numScreens]string{screenNames, shorter} {
		if s := render("", names); width(s) <= h.Width {
			return s
		}
	}
	return render("", shortest)
}

// footer is the last line: the screen's short help, and the latest error,
// notice or connection warning.
type footer struct {
	Common
	help    help.Model
	err     error
	errAt   time.Time
	toast   string
	toastAt time.Time
}

// How long messages stay in the footer.
const (
	toastFor = 5 * time.Second
	errFor   = 20 * time.Second
)

func newFooter(c Common) *footer {
	hm := help.New()
	hm.ShortSeparator = " · "
	return &footer{Common: c, help: hm}
}

func (f *footer) setErr(err error) { f.err, f.errAt, f.toast = err, f.Now(), "" }

func (f *footer) setToast(s string) { f.toast, f.toastAt, f.err = s, f.Now(), nil }

// View renders help on the left and the message on the right; warning
// (the lost connection) wins over both messages.
func (f *footer) View(keys help.KeyMap, warning string) string {
	st, now := f.Styles, f.Now()
	msg := ""
	switch {
	case warning != "":
		msg = st.Bad.Render(warning)
	case f.err != nil && now.Sub(f.errAt) < errFor:
		msg = st.Error.Render("✗ " + oneLine(f.err.Error(), f.Width*2/3))
	case f.toast != "" && now.Sub(f.toastAt) < toastFor:
		msg = st.Toast.Render("✓ " + f.toast)
	}
	mw := lipgloss.Width(msg)
	f.help.Width = max(f.Width-mw-2, 10)
	left := f.help.ShortHelpView(keys.ShortHelp())
	gap := f.Width - lipgloss.Width(left) - mw
	if gap < 1 {
		return fit(msg, f.Width)
	}
	return left + strings.Repeat(" ", gap) + msg
}
