package fsm

import (
	"errors"
	"fmt"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// run.list filters on the server: by labels, workflow name and creation
// time, newest first, paging with a cursor through every match, with and
// without a state.
func TestListRunsWhereFiltersAndPages(t *testing.T) {
	h := newHarness(t)
	for i := range 12 {
		h.now += 1000
		id := fmt.Sprintf("0193%08x-0000-7000-8000-000000000000", i)
		team := []string{"a", "b", "c"}[i%3]
		name := []string{"etl", "report"}[i%2]
		s := h.ok(&Submit{ID: id, Spec: mustParse(t, `{"name":"`+name+`","tasks":[{"key":"x","type":"t"}]}`),
			Labels: map[string]string{"team": team}}).(*SubmitResult)
		if !s.Created {
			t.Fatal("not created")
		}
	}
	collect := func(state string, q RunFilter, limit int) []*Run {
		var all []*Run
		cursor := ""
		for {
			page, next, err := h.f.ListRunsWhere(stateOf(state), q, limit, cursor)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, page...)
			if next == "" {
				return all
			}
			cursor = next
		}
	}
	a := collect("", RunFilter{Labels: map[string]string{"team": "a"}}, 2)
	if len(a) != 4 {
		t.Fatalf("team=a: %d runs, want 4", len(a))
	}
	for i, r := range a {
		if r.Labels["team"] != "a" || i > 0 && r.ID >= a[i-1].ID {
			t.Fatalf("team=a page: %s %v (newest first)", r.ID, r.Labels)
		}
	}
	both := collect("running", RunFilter{Labels: map[string]string{"team": "a"}, Workflow: "etl"}, 1)
	if len(both) != 2 { // i = 0, 6
		t.Fatalf("team=a and workflow etl: %d runs, want 2", len(both))
	}
	after := h.now - 2500 // the last three were created after this
	if got := collect("", RunFilter{CreatedAfter: after}, 100); len(got) != 3 {
		t.Fatalf("created after: %d runs, want 3", len(got))
	}
	if got := collect("", RunFilter{Labels: map[string]string{"team": "nobody"}}, 5); len(got) != 0 {
		t.Fatalf("no match: %d runs", len(got))
	}
}

func mustParse(t *testing.T, spec string) domain.Spec {
	t.Helper()
	s, err := domain.ParseSpec([]byte(spec), domain.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func stateOf(s string) domain.RunState { return domain.RunState(s) }

// A queue made by a typo can be deleted; one with ready or running tasks
// cannot; a task that becomes ready later brings the queue back.
func TestQueueDeleteForgetsAnIdleQueue(t *testing.T) {
	h := newHarness(t)
	h.ok(&QueueSet{Name: "typo", Concurrency: 1})
	if res := h.ok(&QueueDelete{Name: "typo"}).(*ChangedResult); !res.Changed {
		t.Fatal("delete of an idle queue did nothing")
	}
	qs, err := h.f.Queues()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == "typo" {
			t.Fatalf("the deleted queue is still listed: %+v", q)
		}
	}
	if err, _ := h.apply(&QueueDelete{Name: "typo"}).(error); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting it again: %v, want not found", err)
	}
	h.submit("r", `{"tasks":[{"key":"a","type":"t","queue":"busy"}]}`)
	if err, _ := h.apply(&QueueDelete{Name: "busy"}).(error); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("deleting a queue with a ready task: %v, want refused", err)
	}
	if c := h.claim("w", 1, "t"); len(c) != 1 || c[0].Queue != "busy" {
		t.Fatalf("the refused delete lost the task: %+v", c)
	}
	// A queue paused for a run is refused too (the run refers to it).
	h.submit("r2", `{"tasks":[{"key":"a","type":"u","deps":[]},{"key":"b","type":"u","queue":"later","deps":["a"]}]}`)
	h.ok(&QueuePause{Name: "later", RunID: "r2", Paused: true})
	if err, _ := h.apply(&QueueDelete{Name: "later"}).(error); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("deleting a queue paused for a run: %v, want refused", err)
	}
}
