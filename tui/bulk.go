package tui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/google/uuid"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Bulk actions on the runs list: space marks the run under the cursor, `a`
// marks every run the tab and filter show (or unmarks them all), and with
// runs marked, `c` cancels and `R` retries (replays) the marked runs behind
// one confirm dialog that says how many runs it will touch and how many it
// skips. Retry is a replay (a new run from the frozen spec and input, its
// id chosen when the dialog opens, so a repeated call cannot start two) of
// each marked run that ended unsuccessfully (failed, cancelled, reverted).

// bulkDoneMsg reports a finished bulk action; the runs screen clears its
// marks and shows the summary.
type bulkDoneMsg struct {
	verb                  string
	ok, unchanged, failed int
	firstErr              error
}

// bulkVerb is a run action that can apply to many runs.
type bulkVerb struct {
	runVerb
	eligible func(domain.RunState) bool
	skipWhy  string // what the skipped runs are not
}

var (
	bulkCancel = bulkVerb{verbCancel, verbCancel.allowed, "not cancellable (already finished)"}
	bulkRetry  = bulkVerb{runVerb{"retry", "", nil, "Each run is replayed: a new run starts from its frozen spec and input."},
		func(s domain.RunState) bool {
			return s == domain.RunFailed || s == domain.RunCancelled || s == domain.RunReverted
		}, "not failed, cancelled or reverted"}
)

// maxBulkNamed is how many run ids the dialog lists.
const maxBulkNamed = 3

// confirmBulk asks to apply v to the eligible runs of runs (or says that
// none is eligible).
func confirmBulk(c Common, v bulkVerb, runs []rpc.Run) tea.Msg {
	if c.ReadOnly || len(runs) == 0 {
		return nil
	}
	var ids []string
	wf := map[string]int{}
	for _, r := range runs {
		if v.eligible(r.State) {
			ids = append(ids, r.ID)
			wf[r.Workflow]++
		}
	}
	skipped := len(runs) - len(ids)
	if len(ids) == 0 {
		return errMsg{fmt.Errorf("cannot %s any of the %d selected runs: they are %s", v.name, len(runs), v.skipWhy)}
	}
	noun := "runs"
	if len(ids) == 1 {
		noun = "run"
	}
	title := fmt.Sprintf("%s %d %s?", capital(v.name), len(ids), noun)
	var b strings.Builder
	named := make([]string, 0, maxBulkNamed)
	for _, id := range ids[:min(len(ids), maxBulkNamed)] {
		named = append(named, shortID(id))
	}
	b.WriteString(strings.Join(named, " "))
	if len(ids) > maxBulkNamed {
		fmt.Fprintf(&b, " and %d more", len(ids)-maxBulkNamed)
	}
	b.WriteString("\nworkflows " + countList(wf))
	if skipped > 0 {
		fmt.Fprintf(&b, "\n%d selected %s skipped: %s", skipped, plural(skipped, "run", "runs"), v.skipWhy)
	}
	b.WriteString("\n\n" + v.what)
	var newIDs []string
	if v.method == "" {
		for range ids {
			newIDs = append(newIDs, uuid.Must(uuid.NewV7()).String())
		}
	}
	return confirmMsg{title: title, body: b.String(), yes: bulkCmd(c.Client, v.runVerb, ids, newIDs)}
}

// bulkCmd applies a verb to every id in turn (newIDs: the replays' ids).
func bulkCmd(client Client, v runVerb, ids, newIDs []string) tea.Cmd {
	return func() tea.Msg {
		done := bulkDoneMsg{verb: v.name}
		for i, id := range ids {
			cx, cancel := ctx()
			var changed bool
			var err error
			if v.method == "" {
				var res *rpc.SubmitResult
				res, err = client.RunReplay(cx, rpc.ReplayParams{ID: id, NewID: newIDs[i]})
				changed = err == nil && res.Created
			} else {
				var res *rpc.ChangedResult
				res, err = client.RunVerb(cx, v.method, id, "via flowd tui (bulk)")
				changed = err == nil && res.Changed
			}
			cancel()
			switch {
			case err != nil:
				done.failed++
				if done.firstErr == nil {
					done.firstErr = fmt.Errorf("%s %s: %w", v.name, shortID(id), err)
				}
			case changed:
				done.ok++
			default:
				done.unchanged++
			}
		}
		return done
	}
}

// summary is the toast of a finished bulk action.
func (d bulkDoneMsg) summary() string {
	return fmt.Sprintf("%s: %d accepted, %d unchanged, %d failed", d.verb, d.ok, d.unchanged, d.failed)
}

// countList is "etl ×3, billing ×2" (most first, then by name).
func countList(n map[string]int) string {
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if n[a] != n[b] {
			return n[b] - n[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " ×" + itoa(n[k])
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// marks are the runs marked on the runs screen, by id.
type marks map[string]bool

// toggle marks or unmarks id.
func (m marks) toggle(id string) {
	if m[id] {
		delete(m, id)
	} else {
		m[id] = true
	}
}

// markedRuns are the marked runs still loaded (shown by the filter or
// not), in server order.
func (m *runsModel) markedRuns() []rpc.Run {
	var out []rpc.Run
	for _, r := range m.rows {
		if m.marked[r.ID] {
			out = append(out, r)
		}
	}
	return out
}

// markAll marks every run shown (tab and filter), or unmarks them if they
// all are; marks of runs the filter hides stay.
func (m *runsModel) markAll() {
	all := m.length() > 0
	for i := range m.length() {
		all = all && m.marked[m.rows[m.rowAt(i)].ID]
	}
	for i := range m.length() {
		if id := m.rows[m.rowAt(i)].ID; all {
			delete(m.marked, id)
		} else {
			m.marked[id] = true
		}
	}
}

// bulkKey handles the run verbs while runs are marked.
func (m *runsModel) bulkKey(msg tea.KeyMsg) tea.Cmd {
	k := m.Keys
	switch {
	case key.Matches(msg, k.Cancel):
		m.post(confirmBulk(m.Common, bulkCancel, m.markedRuns()))
	case key.Matches(msg, k.Replay):
		m.post(confirmBulk(m.Common, bulkRetry, m.markedRuns()))
	default:
		return errorCmd(fmt.Errorf("%d runs selected: c cancels them, R retries them, esc clears the selection", len(m.marked)))
	}
	return nil
}
