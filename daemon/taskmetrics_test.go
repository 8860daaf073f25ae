package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// startHTTPAgent starts one agent with its HTTP listener and returns it
// with the /metrics URL.
func startHTTPAgent(t *testing.T) (*Agent, string) {
	t.Helper()
	dir := t.TempDir()
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	a, err := New(withRaft(Config{NodeID: "tm1", DataDir: filepath.Join(dir, "tm1"), RaftAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		ForwardAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), Socket: filepath.Join(dir, "tm1.sock"),
		HTTPAddr: httpAddr, HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LogLevel: "error"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := raftNode(a).WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return a, "http://" + httpAddr + "/metrics"
}

// scrape parses /metrics into its families by name.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics answered %d: %.300s", resp.StatusCode, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// series returns the metric of family name whose labels are exactly want.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		ok := true
		for _, l := range m.GetLabel() {
			if want[l.GetName()] != l.GetValue() {
				ok = false
			}
		}
		if ok {
			return m
		}
	}
	return nil
}

// runTasks runs, through the client protocol, one run of workflow "wf-ok"
// whose task (queue mq, type ok) succeeds and one of "wf-bad" whose task
// (queue mq, type bad) fails for good.
func runTasks(t *testing.T, a *Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := client(t, a)
	for _, spec := range []string{
		`{"name":"wf-ok","tasks":[{"key":"a","type":"ok","queue":"mq"}]}`,
		`{"name":"wf-bad","tasks":[{"key":"b","type":"bad","queue":"mq"}]}`,
	} {
		if _, err := c.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(spec)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "w1", Queues: []string{"mq"}, Max: 2, WaitMS: 2000})
	for err == nil && len(got) < 2 {
		var more []rpc.Claimed
		more, err = c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "w1", Queues: []string{"mq"}, Max: 2 - len(got), WaitMS: 2000})
		got = append(got, more...)
	}
	if err != nil {
		t.Fatal(err)
	}
	no := false
	for _, task := range got {
		var ack *rpc.AckResult
		if task.Type == "ok" {
			ack, err = c.TaskComplete(ctx, rpc.CompleteParams{TaskID: task.TaskID, FencingToken: task.FencingToken, Result: json.RawMessage(`1`)})
		} else {
			ack, err = c.TaskFail(ctx, rpc.FailParams{TaskID: task.TaskID, FencingToken: task.FencingToken, Error: "boom", Retryable: &no})
		}
		if err != nil || !ack.Accepted {
			t.Fatalf("%s: ack %+v, %v", task.Type, ack, err)
		}
	}
}

// The leader observes queue wait, run time, run duration and attempts from
// the commits' events: after one task succeeded and one failed, /metrics
// has one observation of each, under the task's queue and type and the
// run's workflow and state.
func TestTaskHistogramsOnMetrics(t *testing.T) {
	a, url := startHTTPAgent(t)
	runTasks(t, a)
	fams := scrape(t, url)
	hist := func(name string, labels map[string]string) {
		t.Helper()
		m := series(fams, name, labels)
		if m == nil || m.GetHistogram() == nil {
			t.Fatalf("no histogram %s%v on /metrics (have %v)", name, labels, fams[name])
		}
		if n := m.GetHistogram().GetSampleCount(); n != 1 {
			t.Errorf("%s%v: %d observations, want 1", name, labels, n)
		}
		if s := m.GetHistogram().GetSampleSum(); s < 0 || s > 10 {
			t.Errorf("%s%v: sum %v s, want between 0 and the test's 10 s", name, labels, s)
		}
	}
	for _, typ := range []string{"ok", "bad"} {
		l := map[string]string{"queue": "mq", "type": typ}
		hist("flowd_task_queue_wait_seconds", l)
		hist("flowd_task_run_seconds", l)
	}
	hist("flowd_run_duration_seconds", map[string]string{"workflow": "wf-ok", "state": "succeeded"})
	hist("flowd_run_duration_seconds", map[string]string{"workflow": "wf-bad", "state": "failed"})
	for typ, outcome := range map[string]string{"ok": "succeeded", "bad": "failed"} {
		m := series(fams, "flowd_task_attempts_total", map[string]string{"queue": "mq", "type": typ, "outcome": outcome})
		if m == nil || m.GetCounter().GetValue() != 1 {
			t.Errorf("flowd_task_attempts_total{queue=mq,type=%s,outcome=%s} = %v, want 1", typ, outcome, m)
		}
	}
	if n := len(fams["flowd_task_attempts_total"].GetMetric()); n != 2 {
		t.Errorf("%d attempt series, want 2 (one per type and outcome): %v", n, fams["flowd_task_attempts_total"])
	}
}

// Only the leader observes, and a stream of distinct queue names shares one
// "_other" child once maxLabelSets are cached.
func TestTaskMetricsLeaderOnlyAndBounded(t *testing.T) {
	leader := false
	m := newTaskMetrics(func() bool { return leader })
	claim := func(q string) fsm.Event {
		return fsm.Event{Kind: "task", Transition: domain.EdgeClaim, Queue: q, Type: "t", At: 2000, Since: 1000}
	}
	m.observe([]fsm.Event{claim("q")})
	if n := len(m.tasks); n != 0 {
		t.Fatalf("a follower cached %d label sets, want none", n)
	}
	leader = true
	evs := make([]fsm.Event, 0, maxLabelSets+10)
	for i := range maxLabelSets + 10 {
		evs = append(evs, claim(fmt.Sprintf("q%d", i)))
	}
	m.observe(evs)
	if n := len(m.tasks); n != maxLabelSets+1 {
		t.Fatalf("%d label sets cached, want %d and the shared %q", n, maxLabelSets, otherLabel)
	}
	other := m.tasks[taskLabels{otherLabel, otherLabel}]
	if other == nil {
		t.Fatal("no shared child for the names past the cap")
	}
	var d dto.Metric
	if err := other.wait.(prometheus.Metric).Write(&d); err != nil {
		t.Fatal(err)
	}
	if n := d.GetHistogram().GetSampleCount(); n != 10 {
		t.Fatalf("the shared child has %d observations, want the 10 past the cap", n)
	}
	if s := d.GetHistogram().GetSampleSum(); s != 10 {
		t.Fatalf("the shared child's sum is %v s, want 10 x 1 s", s)
	}
}

// Observing a commit's events allocates nothing once the label children
// are cached: the hook runs on the apply path of every commit.
func TestTaskMetricsObserveAllocatesNothing(t *testing.T) {
	m := newTaskMetrics(func() bool { return true })
	evs := []fsm.Event{
		{Kind: "task", Transition: domain.EdgeClaim, Queue: "q", Type: "t", At: 2000, Since: 1000},
		{Kind: "task", Transition: domain.EdgeSucceed, Queue: "q", Type: "t", At: 3000, Since: 2000, Outcome: fsm.OutcomeSucceeded},
		{Kind: "run", Transition: domain.EdgeSucceed, To: "succeeded", Workflow: "wf", At: 3000, Since: 500},
		{Kind: "task", Transition: domain.EdgeDependenciesSatisfied, Queue: "q", Type: "t", At: 3000},
		{Kind: "task", Transition: domain.EventScheduleToStartExceeded, Queue: "q", Type: "t", At: 3000},
		{Kind: "task", Transition: domain.EdgeSkip, Queue: "q", Type: "t", At: 3000},
	}
	m.observe(evs) // caches the children
	if n := testing.AllocsPerRun(100, func() { m.observe(evs) }); n != 0 {
		t.Fatalf("observe allocates %.0f times per commit, want 0", n)
	}
}

// A schedule_to_start alert (policy alert) counts once per event, by
// queue and type, and nothing else does.
func TestTaskMetricsCountScheduleToStartAlerts(t *testing.T) {
	m := newTaskMetrics(func() bool { return true })
	m.observe([]fsm.Event{
		{Kind: "task", Transition: domain.EventScheduleToStartExceeded, Queue: "q", Type: "t", At: 3000},
		{Kind: "task", Transition: domain.EventScheduleToStartExceeded, Queue: "q", Type: "u", At: 3000},
		{Kind: "task", Transition: domain.EdgeTimeout, Queue: "q", Type: "t", At: 3000, Error: "schedule_to_start: ..."},
	})
	m.observe([]fsm.Event{{Kind: "task", Transition: domain.EventScheduleToStartExceeded, Queue: "q", Type: "t", At: 4000}})
	for typ, want := range map[string]float64{"t": 2, "u": 1} {
		var d dto.Metric
		if err := m.late.WithLabelValues("q", typ).Write(&d); err != nil {
			t.Fatal(err)
		}
		if got := d.GetCounter().GetValue(); got != want {
			t.Errorf("flowd_task_schedule_to_start_exceeded_total{queue=q,type=%s} = %v, want %v", typ, got, want)
		}
	}
}

// The version-2 workflow transitions are counted by name; other
// transitions are not.
func TestTaskMetricsCountWorkflowTransitions(t *testing.T) {
	m := newTaskMetrics(func() bool { return true })
	m.observe([]fsm.Event{
		{Kind: "task", Transition: domain.EdgeSkip}, {Kind: "task", Transition: domain.EdgeSkip},
		{Kind: "task", Transition: domain.EdgeWake}, {Kind: "run", Transition: "finally"},
		{Kind: "task", Transition: domain.EdgeClaim},
	})
	for tr, want := range map[string]float64{domain.EdgeSkip: 2, domain.EdgeWake: 1, "finally": 1, domain.EdgeGather: 0} {
		var d dto.Metric
		if err := m.decisions.WithLabelValues(tr).Write(&d); err != nil {
			t.Fatal(err)
		}
		if got := d.GetCounter().GetValue(); got != want {
			t.Errorf("flowd_workflow_transitions_total{transition=%s} = %v, want %v", tr, got, want)
		}
	}
}
