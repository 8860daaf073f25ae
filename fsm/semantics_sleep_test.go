package fsm

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// Semantics of sleep tasks (V2, apply_sleep.go).

// A sleep of 2 s is never claimed, completes at the first tick at or
// after its time (leader time), not before, and its dependent runs.
func TestSleepWakesAtItsTime(t *testing.T) {
	h := newSemV2(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t"},{"key":"nap","type":"sleep","duration_ms":2000,"deps":["a"]},{"key":"b","type":"t","deps":["nap"]}]}`)
	h.forward("w", "a")
	start := h.now
	nap := h.task("r", "nap")
	if nap.State != domain.TaskReady || nap.DueAt != start+2000 || nap.Indexed {
		t.Fatalf("sleeping task %+v", nap)
	}
	d, err := h.f.NextDeadlines()
	if err != nil || d.Wake != start+2000 {
		t.Fatalf("the deadline loop does not see the timer: %+v %v", d, err)
	}
	h.wantNoClaim("w")
	h.wantNoClaim("w", domain.TypeSleep)
	h.now = start + 1999
	h.ok(&Tick{})
	h.wantTasks("r", map[string]domain.TaskState{"nap": domain.TaskReady})
	h.now = start + 2000
	h.ok(&Tick{})
	nap = h.task("r", "nap")
	var res struct {
		WokeAt time.Time `json:"woke_at"`
	}
	if nap.State != domain.TaskSucceeded || json.Unmarshal(nap.Result, &res) != nil || res.WokeAt.UnixMilli() != start+2000 {
		t.Fatalf("woken task %+v", nap)
	}
	if !hasTransition(runEvents(h, "r"), "task", "nap", domain.EdgeWake) {
		t.Fatal("no wake event")
	}
	h.forward("w", "b")
	h.wantRun("r", domain.RunSucceeded)
}

// until in the past wakes at the next tick; until in the future at it.
func TestSleepUntil(t *testing.T) {
	h := newSemV2(t)
	past := time.UnixMilli(h.now - 1000).UTC().Format(time.RFC3339Nano)
	future := time.UnixMilli(h.now + 5000).UTC().Format(time.RFC3339Nano)
	h.submit("r", `{"tasks":[{"key":"p","type":"sleep","until":"`+past+`"},{"key":"f","type":"sleep","until":"`+future+`"}]}`)
	if p := h.task("r", "p"); p.DueAt != h.now {
		t.Fatalf("past until: due %d, now %d", p.DueAt, h.now)
	}
	h.ok(&Tick{})
	h.wantTasks("r", map[string]domain.TaskState{"p": domain.TaskSucceeded, "f": domain.TaskReady})
	h.now += 5000
	h.ok(&Tick{})
	h.wantRun("r", domain.RunSucceeded)
}

// A signal skips a sleep early: task.signal, or run.signal by its name.
func TestSleepSkippedBySignal(t *testing.T) {
	h := newSemV2(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"sleep","duration_ms":60000},{"key":"b","type":"sleep","duration_ms":60000,"signal":"go"}]}`)
	if res := h.signal("r", "a", `{"early":true}`, "s1"); !res.Accepted || res.State != domain.TaskSucceeded {
		t.Fatalf("task.signal: %+v", res)
	}
	if res := h.ok(&RunSignal{RunID: "r", Name: "go", Payload: json.RawMessage(`1`)}).(*SignalResult); !res.Accepted {
		t.Fatalf("run.signal: %+v", res)
	}
	h.wantRun("r", domain.RunSucceeded)
	if tk := h.task("r", "a"); string(tk.Result) != `{"early":true}` || tk.DueAt != 0 {
		t.Fatalf("signalled sleep %+v", tk)
	}
	h.now += 60_000
	h.ok(&Tick{}) // the cancelled timers fire nothing
	h.wantRun("r", domain.RunSucceeded)
}

// Type sleep without a timer stays a worker's type (as before V2); the
// timer fields are refused elsewhere and below V2.
func TestSleepTypeWithoutTimerIsAWorkerType(t *testing.T) {
	h := newSemV2(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"sleep"}]}`)
	if c := h.claim("w", 1, "sleep"); len(c) != 1 {
		t.Fatal("a plain task of type sleep is not claimable")
	}
	_, err := domain.ParseSpec([]byte(`{"tasks":[{"key":"a","type":"t","duration_ms":5},{"key":"b","type":"sleep","until":"tomorrow"},{"key":"c","type":"sleep","duration_ms":5,"timeout_ms":100}]}`), domain.DefaultLimits)
	var se *domain.SpecError
	if !errors.As(err, &se) || len(se.Problems) != 3 {
		t.Fatalf("got %v", err)
	}
}
