package fsm

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// Semantics of schedule_to_start_policy: "fail" (the default) fails a task
// left ready past schedule_to_start_ms; "alert" leaves it ready and
// claimable, flags it late and emits one event. Replayed in random batch
// sizes (newSem).

func countTransition(evs []Event, key, transition string) int {
	n := 0
	for _, e := range evs {
		if e.Kind == "task" && e.TaskKey == key && e.Transition == transition {
			n++
		}
	}
	return n
}

func TestScheduleToStartPolicy(t *testing.T) {
	for _, policy := range []string{"", domain.ScheduleToStartFail, domain.ScheduleToStartAlert} {
		t.Run("policy="+policy, func(t *testing.T) {
			h := newSem(t)
			field := ""
			if policy != "" {
				field = `,"schedule_to_start_policy":"` + policy + `"`
			}
			h.submit("r", `{"tasks":[{"key":"a","type":"t","schedule_to_start_ms":500`+field+`}]}`)
			h.now += 499
			h.ok(&Tick{})
			if tk := h.task("r", "a"); tk.State != domain.TaskReady || tk.Late {
				t.Fatalf("before the limit: %+v", tk)
			}
			h.now++
			h.ok(&Tick{})
			tk := h.task("r", "a")
			evs := runEvents(h, "r")
			if policy != domain.ScheduleToStartAlert {
				if tk.State != domain.TaskFailed || tk.Late || !strings.Contains(tk.Error, "schedule_to_start") {
					t.Fatalf("policy %q: %+v", policy, tk)
				}
				if countTransition(evs, "a", domain.EventScheduleToStartExceeded) != 0 {
					t.Fatal("a failing policy emitted the alert event")
				}
				h.wantRun("r", domain.RunFailed)
				return
			}
			if tk.State != domain.TaskReady || !tk.Late || !tk.Indexed || tk.Error != "" {
				t.Fatalf("alert: %+v", tk)
			}
			if n := countTransition(evs, "a", domain.EventScheduleToStartExceeded); n != 1 {
				t.Fatalf("alert events: %d, want 1", n)
			}
			if wakeKeys(t, h.f) != 0 {
				t.Fatal("the alert left its timer armed")
			}
			checkDerived(t, h.f)
			// Still claimable, and it runs to the end like any task.
			c := h.claimOne("w")
			if c.TaskKey != "a" || !h.complete(c, `1`) {
				t.Fatalf("claim after the alert: %+v", c)
			}
			h.wantRun("r", domain.RunSucceeded)
			if !h.task("r", "a").Late {
				t.Fatal("late was cleared")
			}
		})
	}
}

// An alert fires once per task: not on later ticks while it stays ready,
// nor when a retry makes it ready again.
func TestScheduleToStartAlertFiresOnce(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t","schedule_to_start_ms":100,"schedule_to_start_policy":"alert",
		"retry":{"max_attempts":2,"initial_backoff_ms":10}}]}`)
	for range 5 {
		h.now += 100
		h.ok(&Tick{})
	}
	if n := countTransition(runEvents(h, "r"), "a", domain.EventScheduleToStartExceeded); n != 1 {
		t.Fatalf("alert events after 5 ticks: %d, want 1", n)
	}
	c := h.claimOne("w")
	if !h.fail(c, "boom", true) {
		t.Fatal("fail rejected")
	}
	h.now += 10
	h.ok(&Tick{}) // retry_ready: ready again
	if h.taskState("r", "a") != domain.TaskReady {
		t.Fatalf("after the retry: %+v", h.task("r", "a"))
	}
	for range 3 {
		h.now += 100
		h.ok(&Tick{})
	}
	if n := countTransition(runEvents(h, "r"), "a", domain.EventScheduleToStartExceeded); n != 1 {
		t.Fatalf("alert events after the retry: %d, want 1", n)
	}
	if tk := h.task("r", "a"); tk.State != domain.TaskReady || !tk.Indexed {
		t.Fatalf("retried task: %+v", tk)
	}
	checkDerived(t, h.f)
}

// A task the queue's pause holds back is not alerted (as it is not failed).
func TestScheduleToStartAlertSkipsAHeldTask(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t","schedule_to_start_ms":100,"schedule_to_start_policy":"alert"}]}`)
	h.verb(MsgInterrupt, "r")
	h.now += 200
	h.ok(&Tick{})
	if tk := h.task("r", "a"); tk.Late || countTransition(runEvents(h, "r"), "a", domain.EventScheduleToStartExceeded) != 0 {
		t.Fatalf("held task alerted: %+v", tk)
	}
}

func TestScheduleToStartPolicyValidation(t *testing.T) {
	bad := map[string]string{
		`{"tasks":[{"key":"a","type":"t","schedule_to_start_ms":100,"schedule_to_start_policy":"page"}]}`: `"fail" (the default) or "alert"`,
		`{"tasks":[{"key":"a","type":"t","schedule_to_start_policy":"alert"}]}`:                           "needs schedule_to_start_ms",
	}
	for spec, want := range bad {
		_, err := domain.ParseSpec([]byte(spec), domain.DefaultLimits)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a problem naming %q", spec, err, want)
		}
	}
	s, err := domain.ParseSpec([]byte(`{"tasks":[{"key":"a","type":"t","schedule_to_start_ms":100,"schedule_to_start_policy":"alert"}]}`), domain.DefaultLimits)
	if err != nil || !s.Tasks[0].ScheduleToStartAlerts() {
		t.Fatalf("%+v %v", s, err)
	}
}
