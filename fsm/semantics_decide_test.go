package fsm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// Semantics of trigger rules and when conditions (V2, apply_decide.go).

// newSemV2 is newSem with the cluster at V2 (its SetVersion is the log's
// first entry, replayed with the rest).
func newSemV2(t *testing.T) *harness {
	t.Helper()
	h := newSem(t)
	h.ok(&SetVersion{Version: V2})
	return h
}

func (h *harness) submitWith(id, spec, input string, labels map[string]string) any {
	h.t.Helper()
	s, err := domain.ParseSpec([]byte(spec), domain.DefaultLimits)
	if err != nil {
		h.t.Fatalf("spec: %v", err)
	}
	var in json.RawMessage
	if input != "" {
		in = json.RawMessage(input)
	}
	return h.apply(&Submit{ID: id, Spec: s, Input: in, Labels: labels})
}

// A false condition skips its task and, under the default rule, the
// dependents of the skipped task, while a sibling branch runs; the run
// succeeds (skipped counts like success).
func TestWhenFalseSkipsBranchAndDependents(t *testing.T) {
	h := newSemV2(t)
	spec := `{"tasks":[
	 {"key":"start","type":"t"},
	 {"key":"deploy","type":"t","deps":["start"],"when":"input.env == 'prod'"},
	 {"key":"announce","type":"t","deps":["deploy"]},
	 {"key":"test","type":"t","deps":["start"],"when":"deps.start.result.ok"},
	 {"key":"report","type":"t","deps":["announce","test"],"trigger":"none_failed"}]}`
	if _, isErr := h.submitWith("r", spec, `{"env":"dev"}`, nil).(error); isErr {
		t.Fatal("submit refused")
	}
	c := h.claimOne("w")
	h.complete(c, `{"ok":true}`)
	h.wantTasks("r", map[string]domain.TaskState{"deploy": domain.TaskSkipped, "announce": domain.TaskSkipped, "test": domain.TaskReady})
	if tk := h.task("r", "deploy"); !strings.Contains(tk.Error, "when is false") {
		t.Fatalf("skip reason %q", tk.Error)
	}
	if tk := h.task("r", "announce"); !strings.Contains(tk.Error, "trigger all_succeeded not met") {
		t.Fatalf("cascade reason %q", tk.Error)
	}
	h.forward("w", "test", "report") // none_failed accepts a skipped dependency
	h.wantRun("r", domain.RunSucceeded)
	evs := runEvents(h, "r")
	if !hasTransition(evs, "task", "deploy", domain.EdgeSkip) || !hasTransition(evs, "task", "announce", domain.EdgeSkip) {
		t.Fatalf("no skip events: %+v", evs)
	}
}

// A one_failed notifier runs only when a dependency failed; an all_done
// cleanup runs either way; a branch that does not depend on the failure
// goes on, and the run fails once every task settled.
func TestTriggerRulesOnFailureAndSuccess(t *testing.T) {
	spec := `{"tasks":[
	 {"key":"work","type":"t"},
	 {"key":"side","type":"side"},
	 {"key":"notify","type":"t","deps":["work"],"trigger":"one_failed"},
	 {"key":"cleanup","type":"t","deps":["work","notify"],"trigger":"all_done"}]}`
	t.Run("failure", func(t *testing.T) {
		h := newSemV2(t)
		h.submitWith("r", spec, "", nil)
		side := h.claim("w", 1, "side")[0]
		c := h.claim("w", 1, "t")[0]
		h.fail(c, "boom", false)
		h.wantRun("r", domain.RunRunning) // side still runs: the run is not over
		h.wantTasks("r", map[string]domain.TaskState{"work": domain.TaskFailed, "notify": domain.TaskReady, "side": domain.TaskRunning})
		h.forward("w", "notify", "cleanup")
		h.wantRun("r", domain.RunRunning)
		h.complete(side, `1`)
		h.wantRun("r", domain.RunFailed)
	})
	t.Run("success", func(t *testing.T) {
		h := newSemV2(t)
		h.submitWith("r", spec, "", nil)
		h.complete(h.claim("w", 1, "side")[0], `1`)
		h.forward("w", "work")
		h.wantTasks("r", map[string]domain.TaskState{"notify": domain.TaskSkipped, "cleanup": domain.TaskReady})
		h.forward("w", "cleanup")
		h.wantRun("r", domain.RunSucceeded)
	})
}

// Each trigger rule against each combination of dependency outcomes, in a
// run: a, b end as drawn, x has the rule.
func TestEveryTriggerRule(t *testing.T) {
	outcomes := map[string]func(h *harness, c Claimed){
		"ok":   func(h *harness, c Claimed) { h.complete(c, `1`) },
		"fail": func(h *harness, c Claimed) { h.fail(c, "no", false) },
	}
	for _, rule := range domain.Triggers {
		for _, oa := range []string{"ok", "fail"} {
			for _, ob := range []string{"ok", "fail"} {
				h := newSemV2(t)
				h.submitWith("r", `{"tasks":[{"key":"a","type":"a"},{"key":"b","type":"b"},
				 {"key":"x","type":"x","deps":["a","b"],"trigger":"`+rule.Name+`"}]}`, "", nil)
				outcomes[oa](h, h.claim("w", 1, "a")[0])
				outcomes[ob](h, h.claim("w", 1, "b")[0])
				var d domain.DepOutcomes
				for _, o := range []string{oa, ob} {
					if o == "ok" {
						d.Add(domain.TaskSucceeded)
					} else {
						d.Add(domain.TaskFailed)
					}
				}
				want := domain.TaskSkipped
				if rule.Met(d) {
					want = domain.TaskReady
				}
				if got := h.taskState("r", "x"); got != want {
					t.Errorf("%s with a=%s b=%s: x is %s, want %s", rule.Name, oa, ob, got, want)
				}
			}
		}
	}
}

// A condition sees the run's labels and a dependency's result; one that
// fails to evaluate fails its task unrun (condition_failed), and its
// dependents are decided by their rules.
func TestWhenEvaluationErrorFailsTheTask(t *testing.T) {
	h := newSemV2(t)
	spec := `{"tasks":[
	 {"key":"a","type":"t"},
	 {"key":"b","type":"t","deps":["a"],"when":"deps.a.result.missing == 1"},
	 {"key":"c","type":"t","deps":["a"],"when":"labels.team == 'x' && deps.a.state == 'succeeded'"},
	 {"key":"alert","type":"t","deps":["b"],"trigger":"one_failed"}]}`
	h.submitWith("r", spec, "", map[string]string{"team": "x"})
	h.forward("w", "a")
	tb := h.task("r", "b")
	if tb.State != domain.TaskFailed || !strings.HasPrefix(tb.Error, "when: ") || tb.Attempt != 0 {
		t.Fatalf("b: %+v", tb)
	}
	h.wantTasks("r", map[string]domain.TaskState{"c": domain.TaskReady, "alert": domain.TaskReady})
	if !hasTransition(runEvents(h, "r"), "task", "b", domain.EdgeConditionFailed) {
		t.Fatal("no condition_failed event")
	}
	h.complete(h.claimOne("w"), `1`)
	h.complete(h.claimOne("w"), `1`)
	h.wantRun("r", domain.RunFailed)
}

// A root's condition is decided when the run starts.
func TestWhenOnARootIsDecidedAtStart(t *testing.T) {
	h := newSemV2(t)
	h.submitWith("r", `{"tasks":[{"key":"a","type":"t","when":"input.go"},{"key":"b","type":"t","deps":["a"]}]}`, `{"go":false}`, nil)
	h.wantTasks("r", map[string]domain.TaskState{"a": domain.TaskSkipped, "b": domain.TaskSkipped})
	h.wantRun("r", domain.RunSucceeded) // every task skipped: nothing failed
}

// With on_failure revert, a run that uses rules reverts once every task
// settled; skipped tasks have nothing to undo.
func TestDecidedRunRevertsAfterEverythingSettled(t *testing.T) {
	h := newSemV2(t)
	h.submitWith("r", `{"on_failure":"revert","tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a"]},
	 {"key":"c","type":"t","deps":["a"],"trigger":"one_failed"}]}`, "", nil)
	h.fail(h.claimOne("w"), "no", false)
	h.wantTasks("r", map[string]domain.TaskState{"b": domain.TaskSkipped, "c": domain.TaskReady})
	h.forward("w", "c")
	h.wantRun("r", domain.RunReverted)
	h.wantTasks("r", map[string]domain.TaskState{"b": domain.TaskSkipped, "a": domain.TaskReverted, "c": domain.TaskReverted})
}

// Below V2 the agent refuses a spec with the V2 fields (SpecNeedsVersion,
// naming the version and the finalize command); should one be proposed
// anyway, every replica applies it as the release before V2 reads it:
// without them (the same state as the stripped spec). A plain run at V2
// behaves as in V1 (a failure ends it at once).
func TestV2FieldsBelowV2(t *testing.T) {
	full := `{"name":"d","tasks":[{"key":"a","type":"t","when":"true","trigger":"all_done"},{"key":"s","type":"sleep","duration_ms":5},
	 {"key":"l","type":"t","for_each":"[1]","max_parallel":1},{"key":"c","type":"run","definition":"x"},
	 {"key":"i","type":"run","input":"input","spec":{"tasks":[{"key":"x","type":"t"}]}}],"finally":[{"key":"f","type":"t"}]}`
	s, err := domain.ParseSpec([]byte(full), domain.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if err := SpecNeedsVersion(s, V1); !errors.Is(err, ErrNeedsVersion) || !strings.Contains(err.Error(), "flowd operator upgrade finalize") ||
		!strings.Contains(err.Error(), "version 2 and the cluster runs 1") {
		t.Fatalf("SpecNeedsVersion at V1: %v", err)
	}
	if SpecNeedsVersion(s, V2) != nil || SpecNeedsVersion(s.StripV2(), V1) != nil {
		t.Fatal("refused at V2, or a spec without V2 fields refused")
	}
	a, b := newSem(t), newSem(t)
	a.ok(&Submit{ID: "r", Spec: s})
	a.ok(&DefinitionPut{Name: "d", Spec: s})
	b.ok(&Submit{ID: "r", Spec: s.StripV2()})
	b.ok(&DefinitionPut{Name: "d", Spec: s.StripV2()})
	if a.digest() != b.digest() {
		t.Fatal("a spec with V2 fields applied at V1 differs from the spec without them")
	}
	h := newSem(t)
	h.ok(&SetVersion{Version: V2})
	h.submit("plain", `{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"u"},{"key":"c","type":"t","deps":["a"]}]}`)
	h.claim("w", 1, "u")
	h.fail(h.claim("w", 1, "t")[0], "no", false)
	h.wantRun("plain", domain.RunFailed)
	h.wantTasks("plain", map[string]domain.TaskState{"c": domain.TaskCancelled})
}

// A condition that does not compile is refused inside Apply too, with its
// path and the checker's message.
func TestBadConditionIsRefusedWithItsPath(t *testing.T) {
	h := newSemV2(t)
	s := domain.Spec{Tasks: []domain.TaskSpec{{Key: "a", Type: "t"}, {Key: "b", Type: "t", Deps: []string{"a"}, When: "nope > 1"}}}
	res := h.apply(&Submit{ID: "r", Spec: s})
	var se *domain.SpecError
	if err, _ := res.(error); !errors.As(err, &se) || se.Problems[0].Path != "tasks[1].when" || !strings.Contains(se.Problems[0].Message, "undeclared reference") {
		t.Fatalf("got %v", res)
	}
}

// The rules record goes with its run when retention forgets it.
func TestRulesRecordIsDeletedWithTheRun(t *testing.T) {
	h := newSemV2(t)
	h.submitWith("r", `{"tasks":[{"key":"a","type":"t","when":"true"}]}`, "", nil)
	h.forward("w", "a")
	h.wantRun("r", domain.RunSucceeded)
	count := func() (n uint64) {
		_ = h.f.View(func(r Reader) error {
			v, ok, err := r.Get(keyRulesRuns)
			if ok {
				n = getU64(v)
			}
			return err
		})
		return n
	}
	if n := count(); n != 1 {
		t.Fatalf("m/rules_runs = %d with one run holding rules", n)
	}
	h.now += DefaultRetentionMS + 1
	h.ok(&GC{})
	if n := count(); n != 0 {
		t.Fatalf("m/rules_runs = %d after the run was forgotten", n)
	}
	err := h.f.View(func(r Reader) error {
		_, ok, err := r.Get(rulesKey("r"))
		if ok {
			return errors.New("rules record left behind")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A spec without the V2 fields encodes as the 13-field task tuple every
// earlier binary writes (equal spec records across a rolling upgrade); one
// with them round-trips.
func TestSpecTupleKeepsItsV1Layout(t *testing.T) {
	plain := domain.TaskSpec{Key: "a", Type: "t"}
	b := appendTaskSpec(nil, &plain)
	if b[0] != 0x90|13 {
		t.Fatalf("header %#x, want a 13-field tuple", b[0])
	}
	v2 := domain.TaskSpec{Key: "a", Type: "t", When: "true", Trigger: domain.TriggerAllDone}
	var back domain.TaskSpec
	if rest, err := decodeTaskSpec(appendTaskSpec(nil, &v2), &back); err != nil || len(rest) != 0 || back.When != v2.When || back.Trigger != v2.Trigger {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

// A state is fresh until it holds a run, a definition or a schedule.
func TestFreshUntilGivenWork(t *testing.T) {
	h := newHarness(t)
	h.ok(&SettingsSet{BreakerFailures: ptr(-1)})
	h.ok(&QueueSet{Name: "q", Concurrency: 2})
	if !h.f.Fresh() {
		t.Fatal("settings and queues made the state not fresh")
	}
	h.submit("r", `{"tasks":[{"key":"a","type":"t"}]}`)
	if h.f.Fresh() {
		t.Fatal("a state with a run is fresh")
	}
	h2 := newHarness(t)
	h2.ok(&DefinitionPut{Name: "d", Spec: domain.Spec{Name: "d", Tasks: []domain.TaskSpec{{Key: "a", Type: "t"}}}})
	if h2.f.Fresh() {
		t.Fatal("a state with a definition is fresh")
	}
}

// A spawn list with V2 fields: below V2 they are read as the release
// before V2 reads them (dropped); from V2 on they are refused on a spawned
// task.
func TestSpawnWithV2Fields(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		h := newSem(t)
		h.ok(&SetVersion{Version: v})
		h.submit("r", `{"tasks":[{"key":"a","type":"t"}]}`)
		c := h.claimOne("w")
		res := h.apply(&Complete{TaskID: c.TaskID, Token: c.FencingToken,
			Spawn: []domain.TaskSpec{{Key: "k", Type: "t", When: "false"}, {Key: "n", Type: "sleep", DurationMS: 5}}})
		switch err, _ := res.(error); {
		case v == V1 && err != nil:
			t.Fatalf("spawn at V1: %v", err)
		case v == V2 && !errors.Is(err, domain.ErrInvalidSpec):
			t.Fatalf("spawn at V2: %v", res)
		}
		if v == V1 {
			h.wantTasks("r", map[string]domain.TaskState{"k": domain.TaskReady, "n": domain.TaskReady})
			if cs := h.claim("w", 10, "sleep"); len(cs) != 1 {
				t.Fatal("the spawned type sleep is not a worker's task at V1")
			}
		}
	}
}
