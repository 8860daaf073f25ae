package fsm

import (
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// task.list's dead-letter view: failed tasks across runs, newest run
// first, filtered, paged by cursor, also when the scan bound cuts a page.
func TestListTasksFailedAcrossRuns(t *testing.T) {
	h := newSemV2(t)
	spec := `{"name":"wf","tasks":[{"key":"a","type":"t","queue":"q1"},{"key":"b","type":"u"}]}`
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		h.submit(id, spec)
	}
	h.submit("other", `{"name":"x","tasks":[{"key":"a","type":"t","queue":"q1"}]}`)
	for _, c := range h.claim("w", 100, "t") {
		if c.RunID != "r2" {
			h.fail(c, "boom", false)
		}
	}
	ids := func(ts []*Task) (s []string) {
		for _, t := range ts {
			s = append(s, t.ID())
		}
		return s
	}
	got, next, err := h.f.ListTasks(TaskFilter{State: domain.TaskFailed, Workflow: "wf"}, 2, "")
	if err != nil || len(got) != 2 || got[0].ID() != "r4/a" || got[1].ID() != "r3/a" || next != "r3/a" {
		t.Fatalf("page 1: %v next %q %v", ids(got), next, err)
	}
	got, next, err = h.f.ListTasks(TaskFilter{State: domain.TaskFailed, Workflow: "wf"}, 2, next)
	if err != nil || len(got) != 1 || got[0].ID() != "r1/a" || next != "" {
		t.Fatalf("page 2: %v next %q %v", ids(got), next, err)
	}
	got, _, _ = h.f.ListTasks(TaskFilter{State: domain.TaskFailed, Queue: "q1"}, 100, "")
	if len(got) != 4 {
		t.Fatalf("by queue: %v", ids(got))
	}
	got, _, _ = h.f.ListTasks(TaskFilter{State: domain.TaskCancelled, Type: "u"}, 100, "")
	if len(got) != 3 {
		t.Fatalf("cancelled u: %v", ids(got))
	}
	got, _, _ = h.f.ListTasks(TaskFilter{State: domain.TaskFailed, FinishedAfter: h.now}, 100, "")
	if len(got) != 0 {
		t.Fatalf("finished after now: %v", ids(got))
	}
	// The scan bound: one run per page; pages still add up to every match.
	saved := maxListScan
	maxListScan = 1
	defer func() { maxListScan = saved }()
	var all []string
	cursor := ""
	for range 10 {
		got, next, err := h.f.ListTasks(TaskFilter{State: domain.TaskFailed}, 100, cursor)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ids(got)...)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(all) != 4 {
		t.Fatalf("bounded pages: %v", all)
	}
}
