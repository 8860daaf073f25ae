package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/rpc/schedrpc"
)

// fakeClient serves fixed data with deterministic times, like the agent
// would (run.list pages newest first with a cursor, counts per state).

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// fixedNow is the tests' clock: ten minutes after t0.
func fixedNow() time.Time { return t0.Add(10 * time.Minute) }

var testEndpoints = []string{"unix:///tmp/flowd/n1.sock", "unix:///tmp/flowd/n2.sock", "unix:///tmp/flowd/n3.sock"}

type fakeClient struct {
	mu      sync.Mutex
	runs    []rpc.Run // newest first (descending id)
	tasks   map[string][]rpc.Task
	queues  rpc.QueueListResult
	workers []rpc.Worker
	events  []rpc.Event
	status  []*rpc.ClusterStatus // per endpoint; nil = unreachable
	calls   []string
	listN   int
	// selectors: the selector of every run.list call, in order.
	selectors []string
	scheds    []schedrpc.Schedule
	schedN    int                      // schedule.list calls
	logs      map[string][]rpc.LogLine // "<run>/<key>/<attempt>" (tasklogs_test.go)
}

func runID(i int) string { return fmt.Sprintf("0197a0b1-%04x-7000-8000-%012x", i, 0xabc000+i) }

func newFake() *fakeClient {
	f := &fakeClient{tasks: map[string][]rpc.Task{}}
	workflows := []string{"etl", "billing", "report", "etl", "saga"}
	states := []domain.RunState{domain.RunRunning, domain.RunSucceeded, domain.RunFailed, domain.RunPending,
		domain.RunInterrupted, domain.RunSucceeded, domain.RunCancelled, domain.RunReverted, domain.RunRunning, domain.RunSucceeded}
	for i := 12; i >= 1; i-- {
		st := states[(12-i)%len(states)]
		r := rpc.Run{ID: runID(i), Workflow: workflows[i%len(workflows)], State: st,
			CreatedAt: t0.Add(time.Duration(i) * 30 * time.Second), TaskCount: 4,
			Labels: map[string]string{"env": []string{"prod", "staging"}[i%2]}}
		if st != domain.RunPending {
			r.StartedAt = r.CreatedAt.Add(time.Second)
		}
		switch st {
		case domain.RunSucceeded:
			r.Done, r.FinishedAt = 4, r.StartedAt.Add(time.Duration(i)*7*time.Second)
		case domain.RunFailed, domain.RunCancelled, domain.RunReverted:
			r.Done, r.FinishedAt, r.Reason = 3, r.StartedAt.Add(42*time.Second), "task load failed: connection refused"
		case domain.RunRunning, domain.RunInterrupted:
			r.Done = 2
		}
		f.runs = append(f.runs, r)
	}
	// The first run (newest, running) gets a full task graph.
	r := &f.runs[0]
	r.Input = json.RawMessage(`{"source":"s3://bucket/day=2025-06-01","rows":1200,"dry_run":false,"tags":["a","b"]}`)
	r.Labels = map[string]string{"env": "prod", "team": "data"}
	r.TaskCount, r.Done = 6, 3
	mk := func(key, typ string, st domain.TaskState, deps ...string) rpc.Task {
		t := rpc.Task{ID: r.ID + "/" + key, RunID: r.ID, Key: key, Type: typ, Queue: "default", State: st, Deps: deps,
			MaxAttempts: 3, Input: json.RawMessage(`{"key":"` + key + `"}`)}
		if st != domain.TaskPending && st != domain.TaskReady {
			t.Attempt, t.StartedAt = 1, r.StartedAt.Add(2*time.Second)
		}
		if st == domain.TaskSucceeded {
			t.FinishedAt = t.StartedAt.Add(20 * time.Second)
			t.Result = json.RawMessage(`{"rows":1200,"file":"` + key + `.parquet"}`)
			t.FencingToken = 40
			t.Attempts = []rpc.Attempt{{N: 1, Worker: "w1", FencingToken: 40, ClaimedAt: t.StartedAt, EndedAt: t.FinishedAt, Outcome: "succeeded"}}
		}
		return t
	}
	extract := mk("extract", "echo", domain.TaskSucceeded)
	clean := mk("clean", "echo", domain.TaskSucceeded, "extract")
	enrich := mk("enrich", "sleep", domain.TaskSucceeded, "extract")
	load := mk("load", "flaky", domain.TaskRunning, "clean", "enrich")
	load.Attempt, load.FencingToken, load.LeaseOwner, load.Worker = 2, 57, "worker-a", "worker-a"
	load.LeaseExpiresAt = fixedNow().Add(25 * time.Second)
	load.Error = "connection refused"
	load.Attempts = []rpc.Attempt{
		{N: 1, Worker: "worker-b", FencingToken: 51, ClaimedAt: t0.Add(5 * time.Minute), EndedAt: t0.Add(5*time.Minute + 9*time.Second),
			Outcome: "failed", Error: "connection refused"},
		{N: 2, Worker: "worker-a", FencingToken: 57, ClaimedAt: t0.Add(9 * time.Minute), Outcome: "running"},
	}
	report := mk("report", "echo", domain.TaskPending, "load")
	notify := mk("notify", "echo", domain.TaskPending, "extract", "report")
	f.tasks[r.ID] = []rpc.Task{extract, clean, enrich, load, report, notify}

	f.queues = rpc.QueueListResult{Queues: []rpc.Queue{
		{Name: "default", Ready: 4, Running: 2, Concurrency: 8, OldestReadyMS: 12500, Types: map[string]int{"echo": 3, "flaky": 1},
			RateLimit: &rpc.RateLimit{Rate: 20, Burst: 1}, Leased: 400, Throttled: 7,
			Breakers: []rpc.Breaker{{Type: "echo", State: "closed"}, {Type: "flaky", State: "open", Failures: 5, OpenedAt: t0.Add(8 * time.Minute)}}},
		{Name: "emails", Ready: 0, Running: 0, Paused: true, Breakers: []rpc.Breaker{}},
		{Name: "reports", Ready: 12, Running: 1, Concurrency: 1, OldestReadyMS: 95000, Types: map[string]int{"sleep": 12},
			Breakers: []rpc.Breaker{{Type: "sleep", State: "half_open", Failures: 2}}},
	}}
	f.workers = []rpc.Worker{
		{ID: "worker-a", Queues: []string{"default"}, Types: []string{"echo", "flaky"}, InFlight: 2, LastSeen: fixedNow().Add(-time.Second),
			LastHeartbeat: fixedNow().Add(-3 * time.Second), Node: "n1"},
		{ID: "worker-b", Queues: []string{"default", "reports"}, Types: []string{"sleep"}, Waiting: true, LastSeen: fixedNow().Add(-2 * time.Second), Node: "n1"},
		{ID: "worker-c", Queues: []string{"emails"}, LastSeen: fixedNow().Add(-70 * time.Second), Node: "n1"},
	}
	f.scheds = []schedrpc.Schedule{
		{ID: "nightly-etl", State: "active", Cron: "0 2 * * *", TimeZone: "Europe/Paris", Workflow: "etl", Overlap: "skip",
			CatchupWindowMS: 60000, NextFireAt: fixedNow().Add(90 * time.Minute), LastFireAt: fixedNow().Add(-22*time.Hour - 30*time.Minute),
			LastRunID: runID(3), Fires: 12, Started: 11, Skipped: 1, Missed: 2, CreatedAt: t0},
		{ID: "ping", State: "paused", IntervalMS: 30000, Workflow: "report", Overlap: "allow", CatchupWindowMS: 60000,
			LastFireAt: fixedNow().Add(-5 * time.Minute), Fires: 40, Started: 40, CreatedAt: t0, Note: "maintenance"},
	}
	at := t0.Add(9 * time.Minute)
	f.events = []rpc.Event{
		{Index: 1000, Kind: "run", RunID: r.ID, Transition: "created", To: "pending", At: at},
		{Index: 1001, Kind: "run", RunID: r.ID, Transition: "start", From: "pending", To: "running", At: at.Add(time.Second)},
		{Index: 1002, Kind: "task", RunID: r.ID, TaskKey: "extract", Transition: "claim", From: "ready", To: "running", Worker: "w1", Queue: "default", Type: "echo", Attempt: 1, At: at.Add(2 * time.Second)},
		{Index: 1003, Kind: "task", RunID: r.ID, TaskKey: "extract", Transition: "succeed", From: "running", To: "succeeded", Queue: "default", Type: "echo", Attempt: 1, At: at.Add(3 * time.Second)},
		{Index: 1004, Kind: "breaker", Name: "flaky", Type: "flaky", Transition: "open", From: "closed", To: "open", At: at.Add(4 * time.Second)},
		{Index: 1005, Seq: 1, Kind: "task", RunID: r.ID, TaskKey: "load", Transition: "fail", From: "running", To: "retrying", Error: "connection refused", Queue: "default", Type: "flaky", Attempt: 1, At: at.Add(5 * time.Second)},
		{Index: 1006, Kind: "queue", Name: "emails", Queue: "emails", Transition: "pause", At: at.Add(6 * time.Second)},
	}
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		state := "follower"
		if i == 0 {
			state = "leader"
		}
		f.status = append(f.status, &rpc.ClusterStatus{NodeID: id, LeaderID: "n1", State: state, Term: 3, CommitIndex: 1042,
			AppliedIndex: uint64(1042 - i), LastContact: []string{"0s", "12ms", "15ms"}[i], Version: "v0.9.0",
			Peers: []rpc.Peer{{ID: "n1", Address: "127.0.0.1:7001", Suffrage: "Voter", State: "leader"},
				{ID: "n2", Address: "127.0.0.1:7002", Suffrage: "Voter", State: "follower"},
				{ID: "n3", Address: "127.0.0.1:7003", Suffrage: "Voter", State: "follower"}}})
	}
	return f
}

func (f *fakeClient) counts() map[string]int {
	out := map[string]int{}
	for _, s := range domain.RunStates {
		out[string(s)] = 0
	}
	for _, r := range f.runs {
		out[string(r.State)]++
	}
	return out
}

func (f *fakeClient) RunList(_ context.Context, p rpc.ListParams) (*rpc.ListResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listN++
	limit := p.Limit
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	res := &rpc.ListResult{Counts: f.counts(), Runs: []rpc.Run{}}
	sel, err := domain.ParseSelector(p.Selector) // as the agent does
	if err != nil {
		return nil, err
	}
	f.selectors = append(f.selectors, p.Selector)
	i := 0
	if p.Cursor != "" {
		i = sort.Search(len(f.runs), func(j int) bool { return f.runs[j].ID < p.Cursor })
	}
	for ; i < len(f.runs); i++ {
		r := f.runs[i]
		if p.State != "" && r.State != p.State || !sel.Matches(r.Labels) || p.Workflow != "" && r.Workflow != p.Workflow {
			continue
		}
		if len(res.Runs) == limit {
			res.NextCursor = res.Runs[len(res.Runs)-1].ID
			break
		}
		r.Tasks = nil
		res.Runs = append(res.Runs, r)
	}
	return res, nil
}

func (f *fakeClient) find(id string) (*rpc.Run, error) {
	for i := range f.runs {
		if f.runs[i].ID == id || strings.HasSuffix(f.runs[i].ID, id) {
			return &f.runs[i], nil
		}
	}
	return nil, fmt.Errorf("%w: no run matches %q", domain.ErrNotFound, id)
}

func (f *fakeClient) RunGet(_ context.Context, id string) (*rpc.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.find(id)
	if err != nil {
		return nil, err
	}
	out := *r
	out.Tasks = slices.Clone(f.tasks[r.ID])
	return &out, nil
}

func (f *fakeClient) TaskGet(_ context.Context, id string) (*rpc.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rid, key, _ := strings.Cut(id, "/")
	r, err := f.find(rid)
	if err != nil {
		return nil, err
	}
	for _, t := range f.tasks[r.ID] {
		if t.Key == key {
			return &t, nil
		}
	}
	return nil, fmt.Errorf("%w: task %s", domain.ErrNotFound, id)
}

func (f *fakeClient) RunVerb(_ context.Context, method, id, _ string) (*rpc.ChangedResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method+" "+id)
	r, err := f.find(id)
	if err != nil {
		return nil, err
	}
	if method == rpc.MethodRunCancel {
		r.State = domain.RunCancelled
	}
	return &rpc.ChangedResult{Changed: true, Index: 2000}, nil
}

func (f *fakeClient) RunReplay(_ context.Context, p rpc.ReplayParams) (*rpc.SubmitResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	call := "replay " + p.ID
	if p.Input != nil {
		call += " input=" + string(p.Input) // submit_test.go
		src, err := f.find(p.ID)
		if err != nil {
			return nil, err
		}
		f.runs = append([]rpc.Run{{ID: p.NewID, Workflow: src.Workflow, State: domain.RunPending, Input: p.Input,
			ReplayOf: src.ID, CreatedAt: fixedNow()}}, f.runs...)
	}
	f.calls = append(f.calls, call)
	return &rpc.SubmitResult{ID: p.NewID, Created: true}, nil
}

func (f *fakeClient) QueueList(context.Context) (*rpc.QueueListResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues
	return &q, nil
}

func (f *fakeClient) QueuePause(_ context.Context, name, runID string, pause bool) (*rpc.ChangedResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("pause %s %v", name, pause))
	return &rpc.ChangedResult{Changed: true}, nil
}

func (f *fakeClient) WorkersList(context.Context) (*rpc.WorkersResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &rpc.WorkersResult{Workers: slices.Clone(f.workers)}, nil
}

func (f *fakeClient) ClusterStatus(context.Context) (*rpc.ClusterStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := *f.status[0]
	return &s, nil
}

func (f *fakeClient) ClusterStats(context.Context) (*rpc.ClusterStats, error) {
	return &rpc.ClusterStats{TasksPerSecond: 2.5, Running: 3, TasksDone: 420, LeaseExpiries: 2, AppliedIndex: 1042}, nil
}

func (f *fakeClient) EventsList(_ context.Context, p rpc.EventsListParams) (*rpc.EventsListResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []rpc.Event
	for _, e := range f.events {
		if e.Index >= p.FromIndex && (p.RunID == "" || strings.HasSuffix(e.RunID, p.RunID)) {
			out = append(out, e)
		}
	}
	if p.Latest && p.Limit > 0 && len(out) > p.Limit {
		out = out[len(out)-p.Limit:]
	}
	return &rpc.EventsListResult{Events: out, OldestIndex: 1}, nil
}

func (f *fakeClient) Schedules(context.Context) (*schedrpc.ListResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.schedN++
	return &schedrpc.ListResult{Schedules: slices.Clone(f.scheds)}, nil
}

func (f *fakeClient) sched(id string) (*schedrpc.Schedule, error) {
	for i := range f.scheds {
		if f.scheds[i].ID == id {
			return &f.scheds[i], nil
		}
	}
	return nil, fmt.Errorf("%w: no schedule %q", domain.ErrNotFound, id)
}

func (f *fakeClient) SchedulePause(_ context.Context, id string, pause bool) (*rpc.ChangedResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("schedule pause %s %v", id, pause))
	s, err := f.sched(id)
	if err != nil {
		return nil, err
	}
	want := map[bool]string{true: "paused", false: "active"}[pause]
	changed := s.State != want
	s.State = want
	return &rpc.ChangedResult{Changed: changed}, nil
}

func (f *fakeClient) ScheduleTrigger(_ context.Context, id, runID string) (*schedrpc.FireResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "schedule trigger "+id)
	if _, err := f.sched(id); err != nil {
		return nil, err
	}
	return &schedrpc.FireResult{Changed: true, Outcome: "started", RunID: runID}, nil
}

func (f *fakeClient) ScheduleDelete(_ context.Context, id string) (*rpc.ChangedResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "schedule delete "+id)
	n := len(f.scheds)
	f.scheds = slices.DeleteFunc(f.scheds, func(s schedrpc.Schedule) bool { return s.ID == id })
	return &rpc.ChangedResult{Changed: len(f.scheds) < n}, nil
}

func (f *fakeClient) schedLists() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.schedN
}

// Probe implements Prober: fixed statuses, fixed round-trip times.
func (f *fakeClient) Probe(context.Context) []NodeStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]NodeStatus, len(testEndpoints))
	for i, ep := range testEndpoints {
		out[i] = NodeStatus{Endpoint: ep, RTT: time.Duration(i+1) * 300 * time.Microsecond}
		if s := f.status[i]; s != nil {
			c := *s
			out[i].Status = &c
		} else {
			out[i].Err = errors.New("connection to " + ep + " failed: connection refused")
		}
	}
	return out
}

func (f *fakeClient) setRunState(id string, st domain.RunState, done int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, _ := f.find(id)
	r.State, r.Done = st, done
	if st.Final() {
		r.FinishedAt = fixedNow()
	}
}

func (f *fakeClient) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeClient) TaskSignal(_ context.Context, p rpc.TaskSignalParams) (*rpc.SignalResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("signal %s/%s %s token=%d id=%v", p.RunID, p.Key, p.Payload, p.FencingToken, p.SignalID != ""))
	r, err := f.find(p.RunID)
	if err != nil {
		return nil, err
	}
	for i, t := range f.tasks[r.ID] {
		if t.Key == p.Key && t.Waiting {
			f.tasks[r.ID][i].Waiting, f.tasks[r.ID][i].State, f.tasks[r.ID][i].Result = false, domain.TaskSucceeded, p.Payload
			return &rpc.SignalResult{Accepted: true, Tasks: []string{p.Key}, Index: 2100}, nil
		}
	}
	return &rpc.SignalResult{}, nil
}

func (f *fakeClient) RunSubmit(_ context.Context, p rpc.SubmitParams) (*rpc.SubmitResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var head struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(p.Workflow, &head); err != nil {
		return nil, err
	}
	f.calls = append(f.calls, fmt.Sprintf("submit %s input=%s id=%v", head.Name, p.Input, p.ID != ""))
	f.runs = append([]rpc.Run{{ID: p.ID, Workflow: head.Name, State: domain.RunPending, Input: p.Input, CreatedAt: fixedNow()}}, f.runs...)
	return &rpc.SubmitResult{ID: p.ID, Created: true}, nil
}
