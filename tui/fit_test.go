package tui

import (
	"strings"
	"testing"
)

// Every screen and pane fits an 80x24 terminal: no line wider than 80,
// exactly 24 lines.
func TestEveryScreenFits80x24(t *testing.T) {
	for _, c := range []struct {
		name string
		keys []string
		want []string
	}{
		{"runs", []string{"j"}, []string{"› " + shortID(runID(11))}},
		{"run-tasks", []string{"enter"}, []string{"worker-a"}},
		{"run-graph", []string{"enter", "tab"}, []string{"[Graph]"}},
		{"run-timeline", []string{"enter", "tab", "tab"}, []string{"[Timeline]"}},
		{"run-json", []string{"enter", "tab", "tab", "tab"}, []string{"[JSON]"}},
		{"task", []string{"open:task " + shortID(runID(12)) + "/load", "j"}, nil},
		{"task-json", []string{"open:task " + shortID(runID(12)) + "/load", "tab"}, []string{"[JSON]"}},
		{"task-logs", []string{"open:task " + shortID(runID(12)) + "/load", "tab", "tab"}, []string{"[Logs]"}},
		{"queues", []string{"4"}, []string{"reports"}},
		{"workers", []string{"5"}, []string{"worker-c"}},
		{"cluster", []string{"6"}, []string{"Raft configuration"}},
		{"events", []string{"7"}, []string{"breaker"}},
		{"schedules", []string{"8"}, []string{"nightly-etl"}},
		{"failed", []string{"9"}, []string{"failed tasks in"}},
		{"confirm", []string{"c"}, []string{"Cancel run"}},
		{"command", []string{":"}, nil}, // the view after quitting holds it
	} {
		t.Run(c.name, func(t *testing.T) {
			tm, _ := startSized(t, 80, 24, nil)
			for _, k := range c.keys {
				if cmd, ok := strings.CutPrefix(k, "open:"); ok {
					keys(tm, ":")
					tm.Type(cmd)
					keys(tm, "enter")
					waitFor(t, tm, "Task load")
					continue
				}
				keys(tm, k)
			}
			if len(c.want) > 0 {
				waitFor(t, tm, c.want...)
			}
			v := finish(t, tm)
			requireFits(t, v, 80, 24)
			if c.name == "command" && !strings.Contains(v, "esc cancels") {
				t.Errorf("no command line:\n%s", v)
			}
		})
	}
}
