package domain

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRealMachinesValidate(t *testing.T) {
	if err := RunMachine.Validate(); err != nil {
		t.Errorf("RunMachine: %v", err)
	}
	if err := TaskMachine.Validate(); err != nil {
		t.Errorf("TaskMachine: %v", err)
	}
}

// checkEdge asserts that m has an edge called name, leaving exactly from
// (in any order) and ending in to.
func checkEdge[S ~string](t *testing.T, m *Machine[S], name string, from []S, to S) {
	t.Helper()
	e, ok := m.Edge(name)
	if !ok {
		t.Errorf("%s machine: no edge %q", m.Name, name)
		return
	}
	got, want := slices.Clone(e.From), slices.Clone(from)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || e.To != to {
		t.Errorf("%s edge %q: %v -> %s, want %v -> %s", m.Name, name, e.From, e.To, from, to)
	}
}

func TestRunEdges(t *testing.T) {
	type rs = []RunState
	cases := []struct {
		name string
		from rs
		to   RunState
	}{
		{"start", rs{RunPending}, RunRunning},
		{"cancel_before_start", rs{RunPending}, RunCancelled},
		{"succeed", rs{RunRunning}, RunSucceeded},
		{"fail", rs{RunRunning}, RunFailed},
		{"cancel", rs{RunRunning, RunReverting}, RunCancelled},
		{"interrupt", rs{RunRunning, RunReverting}, RunInterrupted},
		{"resume", rs{RunInterrupted}, RunRunning},
		// The product design (outside this repository): running|interrupted;
		// flowd also reverts a failed run (saga).
		{"revert", rs{RunRunning, RunInterrupted, RunFailed}, RunReverting},
		{"reverted", rs{RunReverting}, RunReverted},
		{"revert_failed", rs{RunReverting}, RunFailed},
		{"cancel_interrupted", rs{RunInterrupted}, RunCancelled},
	}
	for _, c := range cases {
		checkEdge(t, RunMachine, c.name, c.from, c.to)
	}
	if e, _ := RunMachine.Edge(EdgeRevert); e.Kind != Compensation {
		t.Errorf("run revert kind = %d, want Compensation", e.Kind)
	}
}

func TestTaskEdges(t *testing.T) {
	type ts = []TaskState
	cases := []struct {
		name string
		from ts
		to   TaskState
	}{
		{"dependencies_satisfied", ts{TaskPending}, TaskReady},
		{"cancel_pending", ts{TaskPending}, TaskCancelled},
		{"claim", ts{TaskReady}, TaskRunning},
		{"cancel_ready", ts{TaskReady}, TaskCancelled},
		{"succeed", ts{TaskRunning}, TaskSucceeded},
		{"fail", ts{TaskRunning}, TaskFailed},
		{"cancel_running", ts{TaskRunning}, TaskCancelled},
		{"reap_lease", ts{TaskRunning}, TaskReady},
		{"schedule_retry", ts{TaskFailed}, TaskRetrying},
		{"retry_ready", ts{TaskRetrying}, TaskReady},
		{"revert", ts{TaskSucceeded, TaskFailed, TaskRunning}, TaskReverting},
		{"reverted", ts{TaskReverting}, TaskReverted},
		{"revert_failed", ts{TaskReverting}, TaskFailed},
		// Extensions beyond the product design's minimum.
		{"cancel_retrying", ts{TaskRetrying}, TaskCancelled},
		{"reuse_result", ts{TaskPending}, TaskSucceeded},
		{"cancel_reverting", ts{TaskReverting}, TaskCancelled},
	}
	for _, c := range cases {
		checkEdge(t, TaskMachine, c.name, c.from, c.to)
	}
	for name, kind := range map[string]EdgeKind{EdgeScheduleRetry: Retry, EdgeRevert: Compensation, EdgeFail: Forward} {
		if e, _ := TaskMachine.Edge(name); e.Kind != kind {
			t.Errorf("task %s kind = %d, want %d", name, e.Kind, kind)
		}
	}
}

func TestTerminalSets(t *testing.T) {
	for _, s := range []RunState{RunSucceeded, RunReverted} {
		if !s.Final() || !s.Done() || len(RunMachine.EdgesFrom(s)) != 0 {
			t.Errorf("run %s: want final, done, no edges (edges %v)", s, RunMachine.EdgesFrom(s))
		}
	}
	for _, s := range []RunState{RunFailed, RunCancelled} {
		if s.Final() || !s.Done() {
			t.Errorf("run %s: want settled (done, not final)", s)
		}
	}
	for _, s := range []RunState{RunPending, RunRunning, RunInterrupted, RunReverting} {
		if s.Final() || s.Done() {
			t.Errorf("run %s must not be done", s)
		}
	}
	for _, s := range []TaskState{TaskReverted} {
		if !s.Final() || !s.Done() || len(TaskMachine.EdgesFrom(s)) != 0 {
			t.Errorf("task %s: want final, done, no edges", s)
		}
	}
	for _, s := range []TaskState{TaskSucceeded, TaskFailed, TaskSkipped, TaskCancelled} {
		if s.Final() || !s.Done() {
			t.Errorf("task %s: want settled (done, not final)", s)
		}
	}
	for _, s := range []TaskState{TaskPending, TaskReady, TaskRunning, TaskRetrying, TaskReverting} {
		if s.Final() || s.Done() {
			t.Errorf("task %s must not be done", s)
		}
	}
	for _, s := range TaskStates {
		if s.Leased() != (s == TaskRunning) {
			t.Errorf("task %s Leased() = %v", s, s.Leased())
		}
	}
	for _, s := range RunStates {
		if !s.Valid() {
			t.Errorf("run %s not valid", s)
		}
	}
	for _, s := range TaskStates {
		if !s.Valid() {
			t.Errorf("task %s not valid", s)
		}
	}
	if RunState("ready").Valid() || TaskState("interrupted").Valid() || RunState("").Valid() {
		t.Error("states of the other enum (or empty) must not be valid")
	}
}

// goodTable is a small valid machine: a -> b -> c(final), b -> d(settled),
// d -> a by a Retry edge.
func goodTable() Machine[string] {
	return Machine[string]{
		Name:    "test",
		Initial: "a",
		States:  []string{"a", "b", "c", "d"},
		Final:   []string{"c"},
		Settled: []string{"d"},
		Edges: []Edge[string]{
			{Name: "ab", From: []string{"a"}, To: "b"},
			{Name: "bc", From: []string{"b"}, To: "c"},
			{Name: "bd", From: []string{"b"}, To: "d"},
			{Name: "da", From: []string{"d"}, To: "a", Kind: Retry},
		},
	}
}

func TestValidateBrokenTables(t *testing.T) {
	good := goodTable()
	if err := good.Validate(); err != nil {
		t.Fatalf("good table rejected: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(m *Machine[string])
		want   error
	}{
		{"duplicate edge name", func(m *Machine[string]) {
			m.Edges = append(m.Edges, Edge[string]{Name: "ab", From: []string{"b"}, To: "c"})
		}, ErrDuplicateEdge},
		{"edge out of final", func(m *Machine[string]) {
			m.Edges = append(m.Edges, Edge[string]{Name: "ca", From: []string{"c"}, To: "a", Kind: Compensation})
		}, ErrEdgeFromFinal},
		{"forward edge out of settled", func(m *Machine[string]) {
			m.Edges[3].Kind = Forward
		}, ErrEdgeFromSettled},
		{"dead end", func(m *Machine[string]) {
			m.States = append(m.States, "e")
			m.Edges = append(m.Edges, Edge[string]{Name: "be", From: []string{"b"}, To: "e"})
		}, ErrDeadEnd},
		{"unknown state in edge to", func(m *Machine[string]) {
			m.Edges = append(m.Edges, Edge[string]{Name: "bx", From: []string{"b"}, To: "x"})
		}, ErrUnknownState},
		{"unknown state in edge from", func(m *Machine[string]) {
			m.Edges = append(m.Edges, Edge[string]{Name: "xa", From: []string{"x"}, To: "a"})
		}, ErrUnknownState},
		{"unknown initial", func(m *Machine[string]) { m.Initial = "x" }, ErrUnknownState},
		{"unknown final", func(m *Machine[string]) { m.Final = append(m.Final, "x") }, ErrUnknownState},
		{"unknown settled", func(m *Machine[string]) { m.Settled = append(m.Settled, "x") }, ErrUnknownState},
		{"unreachable state", func(m *Machine[string]) {
			m.States = append(m.States, "u")
			m.Edges = append(m.Edges, Edge[string]{Name: "uc", From: []string{"u"}, To: "c"})
		}, ErrUnreachableState},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := goodTable()
			c.mutate(&m)
			err := m.Validate()
			if !errors.Is(err, c.want) {
				t.Fatalf("Validate() = %v, want %v", err, c.want)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	m := goodTable()
	m.Edges = append(m.Edges,
		Edge[string]{Name: "ab", From: []string{"a"}, To: "b"},                     // duplicate
		Edge[string]{Name: "ca", From: []string{"c"}, To: "a", Kind: Compensation}, // out of final
	)
	m.States = append(m.States, "u") // unreachable and a dead end
	err := m.Validate()
	for _, want := range []error{ErrDuplicateEdge, ErrEdgeFromFinal, ErrDeadEnd, ErrUnreachableState} {
		if !errors.Is(err, want) {
			t.Errorf("Validate() = %v, missing %v", err, want)
		}
	}
	if errors.Is(err, ErrUnknownState) || errors.Is(err, ErrEdgeFromSettled) {
		t.Errorf("Validate() reports problems that are not there: %v", err)
	}
}

// brokenTaskTable clones the real task table so the global is never touched.
func brokenTaskTable() Machine[TaskState] {
	m := Machine[TaskState]{
		Name: TaskMachine.Name, Initial: TaskMachine.Initial,
		States: slices.Clone(TaskMachine.States), Final: slices.Clone(TaskMachine.Final),
		Settled: slices.Clone(TaskMachine.Settled),
	}
	for _, e := range TaskMachine.Edges {
		e.From = slices.Clone(e.From)
		m.Edges = append(m.Edges, e)
	}
	return m
}

func TestValidateRealTableVariants(t *testing.T) {
	m := brokenTaskTable()
	m.Edges = append(m.Edges, Edge[TaskState]{Name: "interrupt", From: []TaskState{TaskRunning}, To: TaskState("interrupted")})
	if err := m.Validate(); !errors.Is(err, ErrUnknownState) || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("task table with run state: %v", err)
	}

	m = brokenTaskTable()
	m.Edges = append(m.Edges, Edge[TaskState]{Name: "rerun", From: []TaskState{TaskSucceeded}, To: TaskReady})
	if err := m.Validate(); !errors.Is(err, ErrEdgeFromSettled) {
		t.Errorf("forward edge out of succeeded: %v", err)
	}

	m = brokenTaskTable()
	m.Edges = append(m.Edges, Edge[TaskState]{Name: "claim", From: []TaskState{TaskRetrying}, To: TaskRunning})
	if err := m.Validate(); !errors.Is(err, ErrDuplicateEdge) {
		t.Errorf("duplicate claim: %v", err)
	}

	if TaskMachine.HasState("interrupted") || len(TaskMachine.Edges) != 26 { // 16 + timeout, signal, skip, condition_failed, wake, gather(_failed), child_succeeded/failed, reset
		t.Errorf("the global task table was modified")
	}
}

func TestNewMachinePanicsOnBrokenTable(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("NewMachine accepted a broken table")
		}
		if msg, _ := r.(string); !strings.Contains(msg, "invalid test machine") || !strings.Contains(msg, "duplicate edge name") {
			t.Errorf("panic message %q", r)
		}
	}()
	m := goodTable()
	m.Edges = append(m.Edges, m.Edges[0])
	NewMachine(m)
}

func TestNewMachineIndexes(t *testing.T) {
	m := NewMachine(goodTable())
	if got, err := m.Step("a", "ab"); err != nil || got != "b" {
		t.Errorf("Step(a, ab) = %q, %v", got, err)
	}
	// A table that was not built by NewMachine has no index: no edge is found.
	raw := goodTable()
	if _, ok := raw.Edge("ab"); ok {
		t.Errorf("unindexed machine found an edge")
	}
}

func TestStep(t *testing.T) {
	got, err := RunMachine.Step(RunPending, EdgeStart)
	if err != nil || got != RunRunning {
		t.Errorf("Step(pending, start) = %s, %v", got, err)
	}
	if got, err := TaskMachine.Step(TaskFailed, EdgeScheduleRetry); err != nil || got != TaskRetrying {
		t.Errorf("Step(failed, schedule_retry) = %s, %v", got, err)
	}
	// Unknown edge name.
	got, err = RunMachine.Step(RunRunning, "explode")
	if !errors.Is(err, ErrIllegalTransition) || got != RunRunning {
		t.Errorf("Step(running, explode) = %s, %v", got, err)
	}
	// A task edge name is not a run edge.
	if _, err := RunMachine.Step(RunPending, EdgeClaim); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("Step(pending, claim) = %v", err)
	}
	// Known edges that cannot leave the current state.
	illegal := []struct {
		from RunState
		edge string
	}{
		{RunPending, EdgeSucceed}, {RunSucceeded, EdgeRevert}, {RunCancelled, EdgeStart},
		{RunReverted, EdgeRevert}, {RunFailed, EdgeResume}, {RunRunning, EdgeStart},
		{RunInterrupted, EdgeSucceed}, {RunPending, EdgeInterrupt},
	}
	for _, c := range illegal {
		got, err := RunMachine.Step(c.from, c.edge)
		if !errors.Is(err, ErrIllegalTransition) || got != c.from {
			t.Errorf("Step(%s, %s) = %s, %v; want ErrIllegalTransition", c.from, c.edge, got, err)
		}
	}
	if _, err := TaskMachine.Step(TaskSucceeded, EdgeScheduleRetry); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("task Step(succeeded, schedule_retry) = %v", err)
	}
	if _, err := TaskMachine.Step(TaskRetrying, EdgeClaim); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("task Step(retrying, claim) = %v", err)
	}
}

// TestStepAgreesWithTable checks Step, Can and EdgesFrom against the edge
// list for every (state, edge) pair of both machines.
func TestStepAgreesWithTable(t *testing.T) {
	for _, s := range RunStates {
		for _, e := range RunMachine.Edges {
			legal := slices.Contains(e.From, s)
			to, err := RunMachine.Step(s, e.Name)
			if legal != (err == nil) || legal != RunMachine.Can(s, e.Name) || (legal && to != e.To) {
				t.Errorf("run %s --%s--> %s, %v (can %v)", s, e.Name, to, err, RunMachine.Can(s, e.Name))
			}
			if legal != slices.Contains(RunMachine.EdgesFrom(s), e.Name) {
				t.Errorf("run EdgesFrom(%s) = %v disagrees about %s", s, RunMachine.EdgesFrom(s), e.Name)
			}
		}
	}
	for _, s := range TaskStates {
		for _, e := range TaskMachine.Edges {
			legal := slices.Contains(e.From, s)
			to, err := TaskMachine.Step(s, e.Name)
			if legal != (err == nil) || legal != TaskMachine.Can(s, e.Name) || (legal && to != e.To) {
				t.Errorf("task %s --%s--> %s, %v", s, e.Name, to, err)
			}
		}
	}
}

func TestCanEdgesFromEdgeBetween(t *testing.T) {
	if !RunMachine.Can(RunInterrupted, EdgeRevert) || RunMachine.Can(RunSucceeded, EdgeRevert) {
		t.Error("Can(revert) wrong")
	}
	if RunMachine.Can(RunRunning, "nope") {
		t.Error("Can accepted an unknown edge")
	}
	want := map[RunState][]string{
		RunPending:     {EdgeStart, EdgeCancelBeforeStart},
		RunRunning:     {EdgeSucceed, EdgeFail, EdgeCancel, EdgeInterrupt, EdgeRevert},
		RunInterrupted: {EdgeResume, EdgeRevert, EdgeCancelInterrupted},
		RunReverting:   {EdgeCancel, EdgeInterrupt, EdgeReverted, EdgeRevertFailed},
		RunFailed:      {EdgeRevert, EdgeRetry},
		RunSucceeded:   nil,
		RunCancelled:   {EdgeRetry},
		RunReverted:    nil,
	}
	for s, names := range want {
		if got := RunMachine.EdgesFrom(s); !slices.Equal(got, names) {
			t.Errorf("EdgesFrom(%s) = %v, want %v (table order)", s, got, names)
		}
	}
	if got := TaskMachine.EdgesFrom(TaskPending); !slices.Equal(got, []string{EdgeDependenciesSatisfied, EdgeCancelPending, EdgeReuseResult, EdgeSkip, EdgeConditionFailed}) {
		t.Errorf("task EdgesFrom(pending) = %v", got)
	}
	if got := RunMachine.EdgesFrom("bogus"); got != nil {
		t.Errorf("EdgesFrom(bogus) = %v", got)
	}

	between := []struct {
		from, to RunState
		edge     string
		ok       bool
	}{
		{RunPending, RunRunning, EdgeStart, true},
		{RunPending, RunCancelled, EdgeCancelBeforeStart, true},
		{RunRunning, RunCancelled, EdgeCancel, true},
		{RunInterrupted, RunCancelled, EdgeCancelInterrupted, true},
		{RunReverting, RunFailed, EdgeRevertFailed, true},
		{RunFailed, RunReverting, EdgeRevert, true},
		{RunPending, RunSucceeded, "", false},
		{RunRunning, RunPending, "", false},
		{RunSucceeded, RunReverting, "", false},
		{RunRunning, RunRunning, "", false},
	}
	for _, c := range between {
		edge, ok := RunMachine.EdgeBetween(c.from, c.to)
		if edge != c.edge || ok != c.ok {
			t.Errorf("EdgeBetween(%s, %s) = %q, %v; want %q, %v", c.from, c.to, edge, ok, c.edge, c.ok)
		}
	}
	// Every edge's (from, to) pair is found, and the found edge really goes there.
	for _, e := range TaskMachine.Edges {
		for _, f := range e.From {
			name, ok := TaskMachine.EdgeBetween(f, e.To)
			if !ok {
				t.Errorf("EdgeBetween(%s, %s) not found", f, e.To)
				continue
			}
			if to, err := TaskMachine.Step(f, name); err != nil || to != e.To {
				t.Errorf("EdgeBetween(%s, %s) = %s, which steps to %s, %v", f, e.To, name, to, err)
			}
		}
	}
}
