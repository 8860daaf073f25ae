package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// Semantics of for_each loops (V2, apply_loop.go).

// A loop over a 20-element input list runs 20 element tasks, at most
// max_parallel at a time, each with its element; the fan-in receives the
// 20 results in order.
func TestForEachRunsElementsCappedAndGathersInOrder(t *testing.T) {
	h := newSemV2(t)
	var items []string
	for i := range 20 {
		items = append(items, fmt.Sprint(i*10))
	}
	spec := `{"tasks":[{"key":"prep","type":"t"},
	 {"key":"sq","type":"sq","deps":["prep"],"for_each":"input.items","max_parallel":3,"input":{"k":1}},
	 {"key":"join","type":"t","deps":["sq"]}]}`
	h.submitWith("r", spec, `{"items":[`+strings.Join(items, ",")+`]}`, nil)
	h.forward("w", "prep")
	if tk := h.task("r", "sq"); tk.State != domain.TaskReady || tk.Indexed {
		t.Fatalf("loop task %+v", tk)
	}
	done := 0
	for done < 20 {
		cs := h.claim("w", 100, "sq")
		if len(cs) == 0 || len(cs) > 3 {
			t.Fatalf("claimed %d element tasks at once (max_parallel 3), %d done", len(cs), done)
		}
		for _, c := range cs {
			var in struct {
				Item  int             `json:"item"`
				Index int             `json:"index"`
				Input json.RawMessage `json:"input"`
			}
			if err := json.Unmarshal(c.Input, &in); err != nil || c.TaskKey != domain.LoopKey("sq", in.Index) || in.Item != in.Index*10 || string(in.Input) != `{"k":1}` {
				t.Fatalf("element %s input %s", c.TaskKey, c.Input)
			}
			if _, ok := c.DepResults["prep"]; !ok {
				t.Fatalf("element %s does not see prep's result", c.TaskKey)
			}
			h.complete(c, fmt.Sprint(in.Item*in.Item))
			done++
		}
	}
	c := h.claimOne("w")
	var got []int
	if c.TaskKey != "join" || json.Unmarshal(c.DepResults["sq"], &got) != nil || len(got) != 20 || got[19] != 190*190 || got[3] != 900 {
		t.Fatalf("fan-in %s got %s", c.TaskKey, c.DepResults["sq"])
	}
	h.complete(c, `1`)
	h.wantRun("r", domain.RunSucceeded)
}

// An element that fails for good fails the loop and the run; the elements
// not released are cancelled. An empty list succeeds at once with [].
func TestForEachFailureAndEmpty(t *testing.T) {
	h := newSemV2(t)
	h.submitWith("r", `{"tasks":[{"key":"sq","type":"sq","for_each":"input.items","max_parallel":1}]}`, `{"items":[1,2,3]}`, nil)
	h.fail(h.claimOne("w"), "bad item", false)
	h.wantRun("r", domain.RunFailed)
	h.wantTasks("r", map[string]domain.TaskState{"sq": domain.TaskFailed, "sq[1]": domain.TaskSkipped, "sq[2]": domain.TaskSkipped})
	if tk := h.task("r", "sq"); !strings.Contains(tk.Error, "sq[0] failed: bad item") {
		t.Fatalf("loop error %q", tk.Error)
	}
	if _, err := h.retry("r", ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("retry of a failed loop: %v", err)
	}
	h.submitWith("e", `{"tasks":[{"key":"sq","type":"sq","for_each":"input.items"},{"key":"j","type":"t","deps":["sq"]}]}`, `{"items":[]}`, nil)
	c := h.claimOne("w")
	if c.TaskKey != "j" || string(c.DepResults["sq"]) != `[]` {
		t.Fatalf("empty loop: %+v", c)
	}
}

// A list larger than the run's room fails the task, naming the limit; a
// for_each that is not a list does not compile.
func TestForEachLimits(t *testing.T) {
	h := newSemV2(t)
	big := strings.Repeat("1,", domain.DefaultLimits.MaxRunTasks) + "1"
	h.submitWith("r", `{"tasks":[{"key":"sq","type":"sq","for_each":"input.items"}]}`, `{"items":[`+big+`]}`, nil)
	if tk := h.task("r", "sq"); tk.State != domain.TaskFailed || !strings.Contains(tk.Error, fmt.Sprintf("room for %d more tasks", domain.DefaultLimits.MaxRunTasks-1)) {
		t.Fatalf("over the limit: %+v", tk)
	}
	s := domain.Spec{Tasks: []domain.TaskSpec{{Key: "a", Type: "t", ForEach: "1 + 1"}}}
	var se *domain.SpecError
	if err, _ := h.apply(&Submit{ID: "x", Spec: s}).(error); !errors.As(err, &se) || se.Problems[0].Path != "tasks[0].for_each" {
		t.Fatalf("non-list for_each: %v", err)
	}
}
