package fsm

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// Workflow definitions: every rule of apply_definition.go, each test
// replayed at random batch sizes (newSem).

func defSpec(t testing.TB, name, taskType string) domain.Spec {
	t.Helper()
	s, err := domain.ParseSpec([]byte(`{"name":"`+name+`","tasks":[{"key":"a","type":"`+taskType+`"}]}`), domain.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (h *harness) putDef(name string, version int, taskType string) *DefinitionResult {
	h.t.Helper()
	return h.ok(&DefinitionPut{Name: name, Version: version, Spec: defSpec(h.t, name, taskType)}).(*DefinitionResult)
}

func (h *harness) submitDef(id, def string, version int) any {
	h.t.Helper()
	return h.apply(&SubmitDefinition{ID: id, Definition: def, Version: version, Labels: map[string]string{"team": "data"}})
}

func TestDefinitionPutAssignsVersionsAndNeverChangesOne(t *testing.T) {
	h := newSem(t)
	if r := h.putDef("etl", 0, "echo"); !r.Created || r.Version != 1 {
		t.Fatalf("first put: %+v", r)
	}
	// The same spec again without a version is a retry: nothing new.
	if r := h.putDef("etl", 0, "echo"); r.Created || r.Version != 1 {
		t.Fatalf("repeated put: %+v, want version 1 unchanged", r)
	}
	if r := h.putDef("etl", 0, "sleep"); !r.Created || r.Version != 2 {
		t.Fatalf("new spec: %+v, want version 2", r)
	}
	// A version holds one spec forever: the same one is accepted again,
	// another one refused, and nothing changes.
	if r := h.putDef("etl", 1, "echo"); r.Created || r.Version != 1 {
		t.Fatalf("put of version 1 with its own spec: %+v", r)
	}
	before := stateDigest(t, h.f)
	res := h.apply(&DefinitionPut{Name: "etl", Version: 1, Spec: defSpec(t, "etl", "other")})
	err, _ := res.(error)
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "etl@1 already holds another spec") ||
		!strings.Contains(err.Error(), "version 3") {
		t.Fatalf("changing version 1: %v", res)
	}
	// Versions come in order: 5 after 2 is refused.
	res = h.apply(&DefinitionPut{Name: "etl", Version: 5, Spec: defSpec(t, "etl", "other")})
	if err, _ := res.(error); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "the next version is 3") {
		t.Fatalf("version gap: %v", res)
	}
	if after := stateDigest(t, h.f); after != before {
		t.Fatal("a refused put changed state")
	}
	if r := h.putDef("etl", 3, "other"); !r.Created || r.Version != 3 {
		t.Fatalf("explicit next version: %+v", r)
	}
	d, err := h.f.GetDefinition("etl", 0)
	if err != nil || d.Version != 3 || d.Spec.Tasks[0].Type != "other" {
		t.Fatalf("latest: %+v %v", d, err)
	}
	d, err = h.f.GetDefinition("etl", 1)
	if err != nil || d.Version != 1 || d.Spec.Tasks[0].Type != "echo" {
		t.Fatalf("version 1: %+v %v", d, err)
	}
	if _, err := h.f.GetDefinition("etl", 4); !errors.Is(err, ErrNotFound) {
		t.Fatalf("version 4: %v", err)
	}
	vs, err := h.f.DefinitionVersions("etl")
	if err != nil || len(vs) != 3 || vs[0].Version != 1 || vs[2].Version != 3 {
		t.Fatalf("versions: %+v %v", vs, err)
	}
}

func TestDefinitionPutValidates(t *testing.T) {
	h := newSem(t)
	named := func(name string) domain.Spec { s := defSpec(t, "x", "echo"); s.Name = name; return s }
	for _, c := range []*DefinitionPut{
		{Name: "bad name", Spec: named("bad name")},
		{Name: "a@1", Spec: named("a@1")},
		{Name: "etl", Spec: defSpec(t, "other", "echo")}, // names differ
		{Name: "etl", Version: -1, Spec: defSpec(t, "etl", "echo")},
		{Name: "etl", Spec: domain.Spec{Name: "etl"}}, // no tasks
	} {
		if res := h.apply(c); res == nil {
			t.Fatalf("%+v accepted", c)
		} else if _, isErr := res.(error); !isErr {
			t.Fatalf("%+v: %v, want an error", c, res)
		}
	}
	if ds, _ := h.f.Definitions(); len(ds) != 0 {
		t.Fatalf("refused puts stored %+v", ds)
	}
}

func TestSubmitByDefinitionRunsTheLatestVersionAndRecordsIt(t *testing.T) {
	h := newSem(t)
	h.putDef("etl", 0, "echo")
	h.putDef("etl", 0, "sleep")
	res := h.submitDef("r1", "etl", 0)
	if sr, ok := res.(*SubmitResult); !ok || !sr.Created {
		t.Fatalf("submit by name: %v", res)
	}
	r, tasks := h.run("r1")
	if r.Definition != "etl" || r.DefinitionVersion != 2 || r.Workflow != "etl" || tasks["a"].Type != "sleep" || r.Labels["team"] != "data" {
		t.Fatalf("run by etl: definition %s@%d workflow %s task type %s", r.Definition, r.DefinitionVersion, r.Workflow, tasks["a"].Type)
	}
	// A pinned version runs that version.
	h.submitDef("r2", "etl", 1)
	r, tasks = h.run("r2")
	if r.DefinitionVersion != 1 || tasks["a"].Type != "echo" {
		t.Fatalf("run by etl@1: version %d type %s", r.DefinitionVersion, tasks["a"].Type)
	}
	// A later version does not touch runs that exist: the spec is frozen.
	h.putDef("etl", 0, "other")
	if _, tasks = h.run("r1"); tasks["a"].Type != "sleep" {
		t.Fatalf("r1 changed to %s", tasks["a"].Type)
	}
	if sp, err := h.f.GetSpec("r1"); err != nil || sp.Tasks[0].Type != "sleep" || sp.Tasks[0].Queue != "default" {
		t.Fatalf("frozen spec of r1: %+v %v", sp, err)
	}
	h.submitDef("r3", "etl", 0)
	if r, _ = h.run("r3"); r.DefinitionVersion != 3 {
		t.Fatalf("r3 version %d, want 3", r.DefinitionVersion)
	}
	// Submitting the same id again is answered with the existing run.
	if sr := h.submitDef("r1", "etl", 1).(*SubmitResult); sr.Created || sr.ID != "r1" {
		t.Fatalf("resubmit: %+v", sr)
	}
	if r, _ = h.run("r1"); r.DefinitionVersion != 2 {
		t.Fatalf("resubmit changed r1 to version %d", r.DefinitionVersion)
	}
	// Unknown definitions and versions are not found and create nothing.
	for _, c := range []struct {
		def string
		v   int
	}{{"nope", 0}, {"etl", 9}} {
		res := h.submitDef("rx", c.def, c.v)
		if err, _ := res.(error); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "flowd def") {
			t.Fatalf("submit %s@%d: %v", c.def, c.v, res)
		}
	}
	if _, _, err := h.f.GetRun("rx"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused submit created a run: %v", err)
	}
	// The run list filters by definition and version.
	h.submit("plain", `{"name":"etl","tasks":[{"key":"a","type":"echo"}]}`)
	ids := func(q RunFilter) []string {
		runs, _, err := h.f.ListRunsWhere("", q, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}
	if got := strings.Join(ids(RunFilter{Definition: "etl"}), ","); got != "r3,r2,r1" {
		t.Fatalf("runs of definition etl: %s", got)
	}
	if got := strings.Join(ids(RunFilter{Definition: "etl", DefinitionVersion: 1}), ","); got != "r2" {
		t.Fatalf("runs of etl@1: %s", got)
	}
	if got := strings.Join(ids(RunFilter{Workflow: "etl"}), ","); got != "r3,r2,r1,plain" {
		t.Fatalf("runs of workflow etl: %s", got)
	}
}

func TestDefinitionListAndSnapshot(t *testing.T) {
	h := newSem(t)
	h.putDef("etl-x", 0, "echo")
	h.putDef("etl", 0, "echo")
	h.putDef("etl", 0, "sleep")
	h.putDef("billing", 0, "echo")
	ds, err := h.f.Definitions()
	if err != nil || len(ds) != 3 {
		t.Fatalf("list: %+v %v", ds, err)
	}
	want := []struct {
		name        string
		latest, all int
	}{{"billing", 1, 1}, {"etl", 2, 2}, {"etl-x", 1, 1}}
	for i, w := range want {
		if d := ds[i]; d.Latest.Name != w.name || d.Latest.Version != w.latest || d.Versions != w.all {
			t.Fatalf("list[%d] = %s@%d (%d versions), want %s@%d (%d)", i, d.Latest.Name, d.Latest.Version, d.Versions, w.name, w.latest, w.all)
		}
	}
	// Definitions are in snapshots: a restored FSM has the same digest and
	// serves them.
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f2 := restoreInto(t, snap)
	if d, err := f2.GetDefinition("etl", 0); err != nil || d.Version != 2 {
		t.Fatalf("restored latest etl: %+v %v", d, err)
	}
	got, _, _ := f2.Digest()
	if got != h.digest() {
		t.Fatal("restored digest differs")
	}
}

func restoreInto(t *testing.T, snap *Snapshot) *FSM {
	t.Helper()
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	f, err := New(store.NewMemStore(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	return f
}
