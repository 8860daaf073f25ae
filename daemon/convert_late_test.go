package daemon

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
)

// run.get and task.get show a schedule_to_start alert: the policy and
// late: true.
func TestTaskReplyShowsLate(t *testing.T) {
	tk := &fsm.Task{RunID: "r", Key: "a", Type: "t", Queue: "q", State: domain.TaskReady,
		ScheduleToStartMS: 100, ScheduleToStartPolicy: domain.ScheduleToStartAlert, Late: true}
	b, err := json.Marshal(toTask(tk, true))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"late":true`, `"schedule_to_start_policy":"alert"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("task reply %s lacks %s", b, want)
		}
	}
	tk.Late, tk.ScheduleToStartPolicy = false, ""
	b, _ = json.Marshal(toTask(tk, true))
	if strings.Contains(string(b), "late") || strings.Contains(string(b), "policy") {
		t.Errorf("a task without the alert shows it: %s", b)
	}
}
