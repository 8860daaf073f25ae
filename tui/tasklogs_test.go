package tui

import (
	"context"
	"fmt"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

func (f *fakeClient) TaskLogs(_ context.Context, p rpc.TaskLogsParams) (*rpc.TaskLogsResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "task.logs "+p.Key+" "+itoa(p.Attempt))
	r, err := f.find(p.Run)
	if err != nil {
		return nil, err
	}
	for _, t := range f.tasks[r.ID] {
		if t.Key != p.Key {
			continue
		}
		out := &rpc.TaskLogsResult{TaskID: t.ID, State: string(t.State), Cursor: "0.0", Done: t.State.Done()}
		for _, a := range t.Attempts {
			if p.Attempt != 0 && a.N != p.Attempt {
				continue
			}
			lines := f.logs[fmt.Sprintf("%s/%s/%d", r.ID, t.Key, a.N)]
			bytes := 0
			for _, l := range lines {
				bytes += len(l.Line)
			}
			out.Attempts = append(out.Attempts, rpc.AttemptLog{Attempt: a.N, Worker: a.Worker, Outcome: a.Outcome,
				LinesTotal: len(lines), LinesStored: len(lines), Bytes: bytes, Lines: append([]rpc.LogLine(nil), lines...)})
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: task %s/%s", domain.ErrNotFound, p.Run, p.Key)
}

func (f *fakeClient) addLog(run, key string, attempt int, stream string, lines ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.logs == nil {
		f.logs = map[string][]rpc.LogLine{}
	}
	k := fmt.Sprintf("%s/%s/%d", run, key, attempt)
	for _, l := range lines {
		f.logs[k] = append(f.logs[k], rpc.LogLine{At: fixedNow().UnixMilli() + int64(len(f.logs[k]))*250, Stream: stream, Line: l})
	}
}

func (f *fakeClient) logCalls() int {
	n := 0
	for _, c := range f.called() {
		if strings.HasPrefix(c, "task.logs ") {
			n++
		}
	}
	return n
}

// The task screen's Logs pane at 80x24: the latest attempt's log, live (a
// log event for the task refetches it and the new line shows at the end),
// h picks the previous attempt.
func TestTaskLogsPane(t *testing.T) {
	tm, f := start(t)
	id := runID(12)
	f.addLog(id, "load", 1, "stderr", "dial tcp 10.0.0.7:5432: connection refused")
	f.addLog(id, "load", 2, "log", "loading 1200 rows into warehouse.events")
	f.addLog(id, "load", 2, "stdout", "batch 1/3 written")
	tm.Send(tea.WindowSizeMsg{Width: 80, Height: 24})
	keys(tm, ":")
	tm.Type("task " + shortID(id) + "/load")
	keys(tm, "enter")
	waitFor(t, tm, "Task load")
	keys(tm, "tab", "tab")
	waitFor(t, tm, "batch 1/3 written")
	if n := f.logCalls(); n != 1 {
		t.Fatalf("%d task.logs calls to open the pane, want 1", n)
	}

	f.addLog(id, "load", 2, "stdout", "batch 2/3 written")
	tm.Send(eventsMsg{Events: []rpc.Event{{Index: 2001, Kind: "log", RunID: id, TaskKey: "load", Transition: "log", Attempt: 2}}})
	waitFor(t, tm, "batch 2/3 written", "3 lines")
	v := requireGolden(t, tm)
	lines := strings.Split(v, "\n")
	if len(lines) != 24 {
		t.Fatalf("%d lines, want 24", len(lines))
	}
	for _, l := range lines {
		if w := lipgloss.Width(l); w > 80 {
			t.Fatalf("line wider than 80: %d %q", w, l)
		}
	}
	for _, want := range []string{"attempt 2 (2 of 2) · worker worker-a", "log    loading 1200 rows", "stdout batch 2/3 written"} {
		if !strings.Contains(v, want) {
			t.Errorf("logs pane lacks %q:\n%s", want, v)
		}
	}
}

func TestTaskLogsPaneEarlierAttempt(t *testing.T) {
	tm, f := start(t)
	id := runID(12)
	f.addLog(id, "load", 1, "stderr", "dial tcp 10.0.0.7:5432: connection refused")
	f.addLog(id, "load", 2, "log", "second attempt")
	keys(tm, ":")
	tm.Type("task " + shortID(id) + "/load")
	keys(tm, "enter")
	waitFor(t, tm, "Task load")
	keys(tm, "tab", "tab")
	waitFor(t, tm, "second attempt")
	keys(tm, "h")
	waitFor(t, tm, "attempt 1 (1 of 2) · worker worker-b", "connection refused")
	v := finish(t, tm)
	if strings.Contains(v, "second attempt") || strings.Contains(v, "· live") {
		t.Errorf("attempt 1 selected, yet:\n%s", v)
	}
}
