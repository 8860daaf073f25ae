package tui

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// fanNodes is split -> fetch-01..fetch-20 -> merge: 14 fetches succeeded,
// 4 running, 2 failed.
func fanNodes() []dagNode {
	nodes := []dagNode{{Key: "split", Type: "echo", State: "succeeded"}}
	for i := 1; i <= 20; i++ {
		st := "succeeded"
		switch {
		case i > 18:
			st = "failed"
		case i > 14:
			st = "running"
		}
		nodes = append(nodes, dagNode{Key: fmt.Sprintf("fetch-%02d", i), Type: "fetch", State: st, Deps: []string{"split"}})
	}
	deps := make([]string, 0, 20)
	for _, n := range nodes[1:] {
		deps = append(deps, n.Key)
	}
	return append(nodes, dagNode{Key: "merge", Type: "echo", State: "pending", Deps: deps})
}

func TestDAGGroupsParallelTasks(t *testing.T) {
	nodes := fanNodes()
	groups, member := groupCandidates(nodes)
	if len(groups) != 1 || len(groups[0].members) != 20 || groups[0].name != "fetch" {
		t.Fatalf("groups = %+v", groups)
	}
	if member["fetch-07"] != groups[0].id || member["split"] != "" || member["merge"] != "" {
		t.Fatalf("membership %v", member)
	}
	g := layoutDAG(collapse(nodes, groups, member, nil))
	got := ansi.Strip(strings.Join(g.render(NewStyles(false), "fetch-03").lines, "\n"))
	want := " [✓ split]──▶›[fetch ×20  ✓14 ●4 ✗2]──▶ [○ merge]"
	if got != want {
		t.Fatalf("collapsed fan-out:\n%s\nwant\n%s", got, want)
	}
	// Expanded, the members are drawn one by one, with box-drawing edges.
	g = layoutDAG(collapse(nodes, groups, member, map[string]bool{groups[0].id: true}))
	lines := g.render(NewStyles(false), "").lines
	if len(lines) != 20 {
		t.Fatalf("%d rows expanded, want 20", len(lines))
	}
	all := ansi.Strip(strings.Join(lines, "\n"))
	for _, want := range []string{"[✗ fetch-20]", "┌─▶ [✓ fetch-01]─┐", "├─▶ [● fetch-15]─┤", "[✓ fetch-10]─┼─▶ [○ merge]"} {
		if !strings.Contains(all, want) {
			t.Errorf("expanded graph lacks %q:\n%s", want, all)
		}
	}
	if strings.ContainsAny(all, "+|") {
		t.Errorf("ASCII edge characters without --ascii:\n%s", all)
	}
}

func TestDAGSmallGraphsAreNotGrouped(t *testing.T) {
	// Three parallel tasks (under groupMin), and four that differ in type.
	nodes := []dagNode{{Key: "a"}, {Key: "b", Deps: []string{"a"}}, {Key: "c", Deps: []string{"a"}}, {Key: "d", Deps: []string{"a"}}}
	for i, typ := range []string{"x", "y", "x", "y"} {
		nodes = append(nodes, dagNode{Key: fmt.Sprintf("t%d", i), Type: typ, Deps: []string{"d"}})
	}
	if groups, _ := groupCandidates(nodes); len(groups) != 0 {
		t.Fatalf("grouped %+v", groups)
	}
}

func TestGroupName(t *testing.T) {
	for _, c := range []struct {
		keys      []string
		typ, want string
	}{
		{[]string{"fetch-01", "fetch-02", "fetch-10"}, "fetch", "fetch"},
		{[]string{"shard_a", "shard_b"}, "", "shard"},
		{[]string{"alpha", "beta"}, "http", "http"},
		{[]string{"alpha", "beta"}, "", "alpha"},
	} {
		if got := groupName(c.keys, c.typ); got != c.want {
			t.Errorf("groupName(%v, %q) = %q, want %q", c.keys, c.typ, got, c.want)
		}
	}
}

// fanRunID is the run with the 20-child fan-out/fan-in.
var fanRunID = runID(13)

// addFanRun adds the fan-out/fan-in run as the newest run.
func addFanRun(f *fakeClient) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := rpc.Run{ID: fanRunID, Workflow: "crawl", State: domain.RunRunning, CreatedAt: t0.Add(7 * time.Minute),
		StartedAt: t0.Add(7*time.Minute + time.Second), TaskCount: 22, Done: 15}
	f.runs = append([]rpc.Run{r}, f.runs...)
	var tasks []rpc.Task
	for _, n := range fanNodes() {
		tasks = append(tasks, rpc.Task{ID: r.ID + "/" + n.Key, RunID: r.ID, Key: n.Key, Type: n.Type,
			Queue: "default", State: domain.TaskState(n.State), Deps: n.Deps, MaxAttempts: 3})
	}
	f.tasks[r.ID] = tasks
}

// startSized is start at another terminal size, with the fake tweaked
// before the first frame.
func startSized(t *testing.T, w, h int, tweak func(*fakeClient)) (*teatest.TestModel, *fakeClient) {
	t.Helper()
	f := newFake()
	if tweak != nil {
		tweak(f)
	}
	cfg := Config{Client: f, Prober: f, Endpoints: testEndpoints, Now: fixedNow}
	tm := teatest.NewTestModel(t, New(cfg), teatest.WithInitialTermSize(w, h))
	t.Cleanup(func() { _ = tm.Quit() })
	tm.Send(connMsg{State: connLive, Endpoint: testEndpoints[0], Node: "n1"})
	waitFor(t, tm, "● live", shortID(runID(12)))
	return tm, f
}

// requireFits checks a frame's size.
func requireFits(t *testing.T, v string, w, h int) {
	t.Helper()
	lines := strings.Split(v, "\n")
	if len(lines) != h {
		t.Errorf("%d lines, want %d", len(lines), h)
	}
	for _, l := range lines {
		if lw := lipgloss.Width(l); lw > w {
			t.Errorf("line wider than %d: %d %q", w, lw, l)
		}
	}
}

func openGraph(t *testing.T, tm *teatest.TestModel, id string, want ...string) {
	t.Helper()
	keys(tm, ":")
	tm.Type("run " + shortID(id))
	keys(tm, "enter")
	waitFor(t, tm, "Run "+id)
	keys(tm, "tab")
	waitFor(t, tm, append([]string{"[Graph]"}, want...)...)
}

func testFanOutGraph(t *testing.T, w, h int) {
	tm, _ := startSized(t, w, h, addFanRun)
	openGraph(t, tm, fanRunID, "[fetch ×20  ✓14 ●4 ✗2]", "[○ merge]")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	if strings.Contains(v, "fetch-0") || strings.Contains(v, "+-") {
		t.Error("the fan-out is not drawn as one group")
	}
}

func TestGraphFanOut80x24(t *testing.T)  { testFanOutGraph(t, 80, 24) }
func TestGraphFanOut160x45(t *testing.T) { testFanOutGraph(t, 160, 45) }

func testSmallGraph(t *testing.T, w, h int) {
	tm, _ := startSized(t, w, h, nil)
	openGraph(t, tm, runID(12), "[● load]", "[○ notify]")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	if !strings.Contains(v, "┬─▶") {
		t.Error("no box-drawing edges")
	}
}

func TestGraphSmall80x24(t *testing.T)  { testSmallGraph(t, 80, 24) }
func TestGraphSmall160x45(t *testing.T) { testSmallGraph(t, 160, 45) }

func TestGraphGroupExpandCollapse(t *testing.T) {
	tm, _ := startSized(t, 160, 45, addFanRun)
	openGraph(t, tm, fanRunID, "[fetch ×20")
	keys(tm, "l") // split -> the group
	waitFor(t, tm, "›[fetch ×20")
	keys(tm, "enter")
	waitFor(t, tm, "›[✓ fetch-01]", "[✗ fetch-20]")
	keys(tm, "j", " ") // space on a member collapses the group again
	waitFor(t, tm, "›[fetch ×20")
	v := finish(t, tm)
	if strings.Contains(v, "fetch-20") {
		t.Error("the group did not collapse")
	}
}

// Expanded at 80x24, the twenty members scroll with the selection.
func TestGraphGroupExpanded80x24(t *testing.T) {
	tm, _ := startSized(t, 80, 24, addFanRun)
	openGraph(t, tm, fanRunID, "[fetch ×20")
	keys(tm, "l", "enter")
	waitFor(t, tm, "›[✓ fetch-01]")
	keys(tm, "G") // the last task: merge
	waitFor(t, tm, "›[○ merge]")
	v := requireGolden(t, tm)
	requireFits(t, v, 80, 24)
}

func TestGroupState(t *testing.T) {
	for _, c := range []struct {
		states []string
		want   string
	}{
		{[]string{"succeeded", "failed", "running"}, "failed"},
		{[]string{"succeeded", "running", "pending"}, "running"},
		{[]string{"succeeded", "pending", "pending"}, "pending"},
		{[]string{"succeeded", "succeeded"}, "succeeded"},
	} {
		if got := groupState(c.states); got != c.want {
			t.Errorf("groupState(%v) = %q, want %q", c.states, got, c.want)
		}
	}
}

// Twenty fetch -> parse chains between a split and a merge are two groups.
func TestDAGGroupsParallelChains(t *testing.T) {
	nodes := []dagNode{{Key: "split", Type: "echo", State: "succeeded"}}
	var parses []string
	for i := 1; i <= 20; i++ {
		f, p := fmt.Sprintf("fetch-%02d", i), fmt.Sprintf("parse-%02d", i)
		nodes = append(nodes, dagNode{Key: f, Type: "fetch", State: "succeeded", Deps: []string{"split"}},
			dagNode{Key: p, Type: "parse", State: "pending", Deps: []string{f}})
		parses = append(parses, p)
	}
	nodes = append(nodes, dagNode{Key: "merge", Type: "echo", State: "pending", Deps: parses})
	groups, member := groupCandidates(nodes)
	if len(groups) != 2 {
		t.Fatalf("groups = %+v", groups)
	}
	got := ansi.Strip(strings.Join(layoutDAG(collapse(nodes, groups, member, nil)).render(NewStyles(false), "").lines, "\n"))
	want := " [✓ split]──▶ [fetch ×20  ✓20]──▶ [parse ×20  ○20]──▶ [○ merge]"
	if got != want {
		t.Fatalf("chains:\n%s\nwant\n%s", got, want)
	}
}

// A group's edges are the union of its members': eight tasks under two
// parents keep both edges.
func TestDAGGroupKeepsEveryParent(t *testing.T) {
	nodes := []dagNode{{Key: "p1", Type: "split"}, {Key: "p2", Type: "split"}}
	for i := 1; i <= 8; i++ {
		nodes = append(nodes, dagNode{Key: fmt.Sprintf("x%d", i), Type: "work", Deps: []string{[]string{"p1", "p2"}[i%2]}})
	}
	groups, member := groupCandidates(nodes)
	if len(groups) != 1 || len(groups[0].members) != 8 {
		t.Fatalf("groups = %+v", groups)
	}
	c := collapse(nodes, groups, member, nil)
	if g := c[len(c)-1]; !slices.Equal(g.Deps, []string{"p2", "p1"}) {
		t.Fatalf("group deps = %v", g.Deps)
	}
}
