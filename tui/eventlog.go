package tui

import (
	"cmp"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/rpc"
)

// eventLog is a scrolling list of events, oldest at the top. It follows
// the newest event while the cursor is on the last row (like tail -f);
// moving up pauses following. Shared by the events screen and the run
// detail's timeline.
type eventLog struct {
	Common
	evs     []rpc.Event // ordered by (index, seq), at most limit
	limit   int
	view    []int // filtered indices (nil: all)
	nav     listNav
	follow  bool
	query   string
	showRun bool
}

func newEventLog(c Common, limit int, showRun bool) *eventLog {
	return &eventLog{Common: c, limit: limit, follow: true, showRun: showRun}
}

// SetSize re-lays out the list (the header takes one line).
func (e *eventLog) SetSize(w, h int) {
	e.Common.SetSize(w, h)
	e.nav.set(e.length(), h-1)
	e.stick()
}

func (e *eventLog) length() int {
	if e.view != nil {
		return len(e.view)
	}
	return len(e.evs)
}

func (e *eventLog) at(i int) *rpc.Event {
	if e.view != nil {
		return &e.evs[e.view[i]]
	}
	return &e.evs[i]
}

func evLess(a, b rpc.Event) int {
	return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.Seq, b.Seq))
}

// add appends live events (already in order and deduplicated upstream).
func (e *eventLog) add(evs []rpc.Event) {
	if len(evs) == 0 {
		return
	}
	if n := len(e.evs); n > 0 && evLess(evs[0], e.evs[n-1]) <= 0 {
		e.merge(evs)
		return
	}
	e.evs = append(e.evs, evs...)
	e.trim()
}

// merge folds a backfill (or an out-of-order batch) into the log.
func (e *eventLog) merge(evs []rpc.Event) {
	all := append(slices.Clone(e.evs), evs...)
	slices.SortStableFunc(all, evLess)
	e.evs = slices.CompactFunc(all, func(a, b rpc.Event) bool { return a.Index == b.Index && a.Seq == b.Seq })
	e.trim()
}

func (e *eventLog) trim() {
	if len(e.evs) > e.limit {
		e.evs = slices.Clone(e.evs[len(e.evs)-e.limit:])
	}
	e.refilter()
}

// reset empties the log (a different run).
func (e *eventLog) reset() {
	e.evs, e.view, e.follow = nil, nil, true
	e.nav = listNav{}
	e.refilter()
}

func (e *eventLog) setQuery(q string) {
	e.query = strings.TrimSpace(q)
	e.refilter()
}

func (e *eventLog) refilter() {
	e.view = nil
	if e.query != "" {
		words := strings.Fields(strings.ToLower(e.query))
		e.view = []int{}
		for i := range e.evs {
			hay := strings.ToLower(eventText(&e.evs[i]))
			ok := true
			for _, w := range words {
				if !strings.Contains(hay, w) {
					ok = false
					break
				}
			}
			if ok {
				e.view = append(e.view, i)
			}
		}
	}
	e.nav.set(e.length(), e.Height-1)
	e.stick()
}

// stick keeps the newest event in view while following.
func (e *eventLog) stick() {
	if e.follow {
		e.nav.to(e.nav.n - 1)
	}
}

// eventText is what the filter matches.
func eventText(ev *rpc.Event) string {
	return strings.Join([]string{ev.Kind, ev.RunID, ev.TaskKey, ev.Name, ev.Transition, ev.From, ev.To,
		ev.Worker, ev.Queue, ev.Type, ev.Error}, " ")
}

// Update handles navigation keys.
func (e *eventLog) Update(msg tea.Msg) (*eventLog, tea.Cmd) {
	if k, ok := msg.(tea.KeyMsg); ok && e.nav.key(e.Keys, k) {
		e.follow = e.nav.cursor >= e.nav.n-1
	}
	return e, nil
}

// ShortHelp implements help.KeyMap.
func (e *eventLog) ShortHelp() []key.Binding {
	return []key.Binding{e.Keys.Up, e.Keys.Down, e.Keys.Bottom}
}

// FullHelp implements help.KeyMap.
func (e *eventLog) FullHelp() [][]key.Binding { return [][]key.Binding{e.Keys.nav()} }

// selected is the event under the cursor.
func (e *eventLog) selected() (rpc.Event, bool) {
	if e.nav.n == 0 {
		return rpc.Event{}, false
	}
	return *e.at(e.nav.cursor), true
}

// View renders the header and the visible events.
func (e *eventLog) View() string {
	st := e.Styles
	// A run's timeline carries milliseconds: its events are often within
	// one second of each other (a claim, its completion, the next claim).
	stamp, tw := clock, 8
	if !e.showRun {
		stamp, tw = clockMillis, 12
	}
	cols := []column{{Title: "TIME", Width: tw}, {Title: "INDEX", Width: 9, Right: true}, {Title: "KIND", Width: 12}}
	if e.showRun {
		cols = append(cols, column{Title: "RUN", Width: 12})
	}
	cols = append(cols, column{Title: "TASK/NAME", Min: 8, Flex: 2}, column{Title: "TRANSITION", Min: 20, Flex: 3},
		column{Title: "DETAIL", Min: 10, Flex: 4})
	t := newTable(st, cols, e.Width)
	empty := "no events yet (the stream shows them as they are applied)"
	if e.query != "" {
		empty = "no event matches the filter"
	}
	return t.render(e.nav, e.Height, empty, func(i int) []string {
		ev := e.at(i)
		name := ev.TaskKey
		if name == "" {
			name = ev.Name
		}
		trans := ev.Transition
		if ev.From != "" || ev.To != "" {
			trans += " " + dash(ev.From) + "→" + st.Paint(ev.To, dash(ev.To))
		}
		cells := []string{stamp(ev.At), utoa(ev.Index) + "." + itoa(int(ev.Seq)), ev.Kind}
		if e.showRun {
			cells = append(cells, shortID(ev.RunID))
		}
		return append(cells, name, trans, eventDetail(ev))
	})
}

func eventDetail(ev *rpc.Event) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	if ev.Attempt > 0 {
		add("attempt", itoa(ev.Attempt))
	}
	add("worker", ev.Worker)
	add("queue", ev.Queue)
	add("type", ev.Type)
	if ev.Error != "" {
		parts = append(parts, "error: "+oneLine(ev.Error, 200))
	}
	return strings.Join(parts, " ")
}
