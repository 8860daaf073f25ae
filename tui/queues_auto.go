package tui

import (
	"strconv"
	"time"

	"github.com/flowd/flowd/rpc"
)

// Adaptive concurrency on the queues screen: the CAP column marks an auto
// queue's cap ("4~"), and the detail line shows the cap, its floor and
// ceiling, the latency target and a sparkline of the caps the leader set
// (from the event stream's increase/decrease_concurrency and each load of
// queue.list, since the TUI started).

// capHistory is how many recent caps the sparkline shows.
const capHistory = 24

// capCell is the CAP column.
func capCell(q *rpc.Queue) string {
	switch {
	case q.Auto != nil:
		return itoa(q.Concurrency) + "~"
	case q.Concurrency > 0:
		return itoa(q.Concurrency)
	}
	return "∞"
}

// noteCap records the cap a queue event set.
func (m *queuesModel) noteCap(e rpc.Event) {
	if e.Kind != "queue" || (e.Transition != "increase_concurrency" && e.Transition != "decrease_concurrency") {
		return
	}
	if n, err := strconv.Atoi(e.To); err == nil {
		m.pushCap(e.Queue, n)
	}
}

// sampleCaps records each auto queue's cap as loaded.
func (m *queuesModel) sampleCaps() {
	for _, q := range m.queues {
		if q.Auto != nil {
			m.pushCap(q.Name, q.Concurrency)
		}
	}
}

func (m *queuesModel) pushCap(queue string, n int) {
	if m.caps == nil {
		m.caps = map[string][]int{}
	}
	h := m.caps[queue]
	if len(h) > 0 && h[len(h)-1] == n {
		return
	}
	h = append(h, n)
	if len(h) > capHistory {
		h = h[len(h)-capHistory:]
	}
	m.caps[queue] = h
}

// autoDetail describes an auto queue for the detail line.
func (m *queuesModel) autoDetail(q rpc.Queue) string {
	if q.Auto == nil {
		return ""
	}
	target := time.Duration(q.Auto.TargetLatencyMS) * time.Millisecond
	s := " · auto cap " + itoa(q.Concurrency) + " (floor " + itoa(q.Auto.Min) + ", ceiling " + itoa(q.Auto.Max) +
		", target " + target.String() + ")"
	if h := m.caps[q.Name]; len(h) > 1 {
		s += " caps " + m.Styles.Paint("running", m.Styles.Sparkline(h))
	}
	return s
}
