package fsm

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// Schedules: every rule of apply_schedule.go, each test replayed at random
// batch sizes (newSem).

const schedSpec = `{"name":"nightly","tasks":[{"key":"a","type":"echo"}]}`

// createSchedule creates schedule id firing every second from h.now+1s.
func (h *harness) createSchedule(id string, overlap domain.Overlap) *Schedule {
	h.t.Helper()
	s, err := domain.ParseSpec([]byte(schedSpec), domain.DefaultLimits)
	if err != nil {
		h.t.Fatal(err)
	}
	res := h.ok(&ScheduleCreate{ID: id, IntervalMS: 1000, Spec: s, Input: []byte(`{"n":1}`),
		Labels: map[string]string{"team": "data"}, Overlap: overlap, NextFireAt: h.now + 1000}).(*ScheduleResult)
	if !res.Created || res.State != domain.ScheduleActive {
		h.t.Fatalf("create: %+v", res)
	}
	return h.sched(id)
}

func (h *harness) sched(id string) *Schedule {
	h.t.Helper()
	s, _, err := h.f.GetSchedule(id)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// fireDue advances the clock to the schedule's next fire time and fires it
// on time, as the leader's loop would.
func (h *harness) fireDue(id string) *FireResult {
	h.t.Helper()
	s := h.sched(id)
	h.now = max(h.now, s.NextFireAt)
	return h.ok(&ScheduleFire{ID: id, Due: s.NextFireAt, FireAt: s.NextFireAt, Next: s.NextFireAt + 1000}).(*FireResult)
}

func (h *harness) wantCounts(id string, fires, started, skipped, missed uint64) {
	h.t.Helper()
	s := h.sched(id)
	if s.Fires != fires || s.Started != started || s.Skipped != skipped || s.Missed != missed {
		h.t.Fatalf("schedule %s: fires %d started %d skipped %d missed %d, want %d %d %d %d",
			id, s.Fires, s.Started, s.Skipped, s.Missed, fires, started, skipped, missed)
	}
}

// finish runs the one task of a run to success.
func (h *harness) finish(run string) {
	h.t.Helper()
	for _, c := range h.claim("w", 10) {
		if c.RunID == run {
			h.complete(c, `"ok"`)
			continue
		}
		h.fail(c, "not this one", true)
	}
	h.wantRun(run, domain.RunSucceeded)
}

func TestScheduleFireStartsALabelledRunOnce(t *testing.T) {
	h := newSem(t)
	h.createSchedule("s1", "")
	due := h.sched("s1").NextFireAt
	res := h.fireDue("s1")
	if !res.Changed || res.Outcome != domain.OutcomeStarted || res.RunID != domain.ScheduleRunID("s1", due) {
		t.Fatalf("fire: %+v", res)
	}
	r, _ := h.run(res.RunID)
	if r.Labels[domain.ScheduleLabel] != "s1" || r.Labels["team"] != "data" || string(r.Input) != `{"n":1}` {
		t.Fatalf("run labels %v input %s", r.Labels, r.Input)
	}
	// The same fire proposed again (a new leader that had not seen it): a
	// lost race that changes nothing.
	before := stateDigest(t, h.f)
	again := h.ok(&ScheduleFire{ID: "s1", Due: due, FireAt: due, Next: due + 1000}).(*FireResult)
	if again.Changed || stateDigest(t, h.f) != before {
		t.Fatalf("second fire of %d: %+v, state changed %v", due, again, stateDigest(t, h.f) != before)
	}
	h.wantCounts("s1", 1, 1, 0, 0)
	if s := h.sched("s1"); s.NextFireAt != due+1000 || s.LastFireAt != due || s.LastRunID != res.RunID {
		t.Fatalf("after fire: %+v", s)
	}
	runs, _, err := h.f.ListRunsWhere("", RunFilter{Labels: map[string]string{domain.ScheduleLabel: "s1"}}, 10, "")
	if err != nil || len(runs) != 1 || runs[0].ID != res.RunID {
		t.Fatalf("runs by schedule: %v %v", runs, err)
	}
}

func TestScheduleNeverFiresEarlyOrBackwards(t *testing.T) {
	h := newSem(t)
	h.createSchedule("s1", "")
	due := h.sched("s1").NextFireAt
	before := stateDigest(t, h.f)
	// The leader's clock says it is due, the FSM's says not yet: rejected.
	wantErr(t, h.apply(&ScheduleFire{ID: "s1", Due: due, FireAt: due, Next: due + 1000}), ErrInvalidArgument)
	h.now = due
	wantErr(t, h.apply(&ScheduleFire{ID: "s1", Due: due, FireAt: due, Next: due}), ErrInvalidArgument)
	wantErr(t, h.apply(&ScheduleFire{ID: "s1", Due: due, FireAt: due - 1, Next: due + 1000}), ErrInvalidArgument)
	if stateDigest(t, h.f) != before {
		t.Fatal("a rejected fire changed state")
	}
	h.fireDue("s1")
	h.wantCounts("s1", 1, 1, 0, 0)
}

func TestScheduleCatchUpRunsRecentFiresAndCountsOlderOnes(t *testing.T) {
	h := newSem(t)
	h.createSchedule("s1", domain.OverlapAllow)
	due := h.sched("s1").NextFireAt
	// Down for 10.5 s with a 60 s window: nothing is missed, each fire runs once.
	h.now = due + 10500
	for i := range 11 {
		res := h.fireDue("s1")
		if res.RunID != domain.ScheduleRunID("s1", due+int64(i)*1000) {
			t.Fatalf("catch-up fire %d started %s", i, res.RunID)
		}
	}
	h.wantCounts("s1", 11, 11, 0, 0)
	// Down for 100 s: 40 fires are older than the window (missed), the
	// rest run.
	next := h.sched("s1").NextFireAt
	h.now = next + 99_500
	res := h.ok(&ScheduleFire{ID: "s1", Due: next, FireAt: next + 40_000, Next: next + 41_000,
		Missed: 40, MissedFrom: next, MissedTo: next + 39_000}).(*FireResult)
	if !res.Changed || res.RunID != domain.ScheduleRunID("s1", next+40_000) {
		t.Fatalf("fire after downtime: %+v", res)
	}
	h.wantCounts("s1", 12, 12, 0, 40)
	// Missed with no fire in the window (only possible with a short window).
	next = h.sched("s1").NextFireAt
	res = h.ok(&ScheduleFire{ID: "s1", Due: next, Next: h.now + 500, Missed: 3, MissedFrom: next, MissedTo: next + 2000}).(*FireResult)
	if !res.Changed || res.RunID != "" {
		t.Fatalf("missed only: %+v", res)
	}
	h.wantCounts("s1", 12, 12, 0, 43)
	// A claim of missed fires must agree with the fire time.
	next = h.sched("s1").NextFireAt
	h.now = next
	wantErr(t, h.apply(&ScheduleFire{ID: "s1", Due: next, FireAt: next, Next: next + 1000, Missed: 2}), ErrInvalidArgument)
}

func TestScheduleOverlapSkip(t *testing.T) {
	h := newSem(t)
	h.createSchedule("s1", domain.OverlapSkip)
	first := h.fireDue("s1")
	if res := h.fireDue("s1"); res.Outcome != domain.OutcomeSkipped || res.RunID != "" {
		t.Fatalf("overlapping fire: %+v", res)
	}
	h.wantCounts("s1", 2, 1, 1, 0)
	h.finish(first.RunID)
	if res := h.fireDue("s1"); res.Outcome != domain.OutcomeStarted {
		t.Fatalf("fire after the run finished: %+v", res)
	}
	h.wantCounts("s1", 3, 2, 1, 0)
}

func TestScheduleOverlapBufferOne(t *testing.T) {
	h := newSem(t)
	h.createSchedule("s1", domain.OverlapBufferOne)
	first := h.fireDue("s1")
	buffered := h.sched("s1").NextFireAt
	if res := h.fireDue("s1"); res.Outcome != domain.OutcomeBuffered || res.RunID != domain.ScheduleRunID("s1", buffered) {
		t.Fatalf("second fire: %+v", res)
	}
	if res := h.fireDue("s1"); res.Outcome != domain.OutcomeSkipped {
		t.Fatalf("third fire (one is buffered already): %+v", res)
	}
	// Released too early: a lost race.
	if res := h.ok(&ScheduleFire{ID: "s1", Release: true, FireAt: buffered}).(*FireResult); res.Changed {
		t.Fatalf("release while the first run runs: %+v", res)
	}
	h.finish(first.RunID)
	wrong := h.ok(&ScheduleFire{ID: "s1", Release: true, FireAt: buffered + 1}).(*FireResult)
	res := h.ok(&ScheduleFire{ID: "s1", Release: true, FireAt: buffered}).(*FireResult)
	if wrong.Changed || !res.Changed || res.RunID != domain.ScheduleRunID("s1", buffered) {
		t.Fatalf("release of another time %+v, release %+v", wrong, res)
	}
	if again := h.ok(&ScheduleFire{ID: "s1", Release: true, FireAt: buffered}).(*FireResult); again.Changed {
		t.Fatalf("second release: %+v", again)
	}
	h.wantRun(res.RunID, domain.RunRunning)
	h.wantCounts("s1", 3, 2, 1, 0)
}

func TestScheduleOverlapAllowAndCancelOther(t *testing.T) {
	h := newSem(t)
	h.createSchedule("allow", domain.OverlapAllow)
	a1, a2 := h.fireDue("allow"), h.fireDue("allow")
	h.wantRun(a1.RunID, domain.RunRunning)
	h.wantRun(a2.RunID, domain.RunRunning)
	h.wantCounts("allow", 2, 2, 0, 0)

	h.createSchedule("cancel", domain.OverlapCancelOther)
	c1 := h.fireDue("cancel")
	c2 := h.fireDue("cancel")
	h.wantRun(c1.RunID, domain.RunCancelled)
	h.wantRun(c2.RunID, domain.RunRunning)
	if s := h.sched("cancel"); len(s.Active) != 1 || s.Active[0] != c2.RunID {
		t.Fatalf("active after cancel_other: %v", s.Active)
	}
}

func TestSchedulePauseResumeDelete(t *testing.T) {
	h := newSem(t)
	h.createSchedule("s1", "")
	due := h.sched("s1").NextFireAt
	if !h.ok(&SchedulePause{ID: "s1", Paused: true, Note: "maintenance"}).(*ChangedResult).Changed {
		t.Fatal("pause did not change")
	}
	if h.ok(&SchedulePause{ID: "s1", Paused: true}).(*ChangedResult).Changed {
		t.Fatal("second pause changed")
	}
	h.now = due + 5000
	if res := h.ok(&ScheduleFire{ID: "s1", Due: due, FireAt: due, Next: due + 1000}).(*FireResult); res.Changed {
		t.Fatalf("fire of a paused schedule: %+v", res)
	}
	wantErr(t, h.apply(&SchedulePause{ID: "s1"}), ErrInvalidArgument) // resume needs the next fire time
	if !h.ok(&SchedulePause{ID: "s1", Next: h.now + 1000}).(*ChangedResult).Changed {
		t.Fatal("resume did not change")
	}
	if s := h.sched("s1"); s.State != domain.ScheduleActive || s.NextFireAt != h.now+1000 || s.Note != "maintenance" || s.Fires != 0 {
		t.Fatalf("after resume: %+v", s)
	}
	run := h.fireDue("s1").RunID
	if !h.ok(&ScheduleDelete{ID: "s1"}).(*ChangedResult).Changed || h.ok(&ScheduleDelete{ID: "s1"}).(*ChangedResult).Changed {
		t.Fatal("delete, then delete again")
	}
	if _, _, err := h.f.GetSchedule("s1"); err == nil {
		t.Fatal("deleted schedule still read")
	}
	h.wantRun(run, domain.RunRunning) // its runs stay
	wantErr(t, h.apply(&SchedulePause{ID: "s1", Paused: true}), ErrNotFound)
	if res := h.ok(&ScheduleFire{ID: "s1", Due: h.now + 1000, FireAt: h.now, Next: h.now + 2000}).(*FireResult); res.Changed {
		t.Fatalf("fire after delete: %+v", res)
	}
	// Created paused: no fire until resumed.
	s, _ := domain.ParseSpec([]byte(schedSpec), domain.DefaultLimits)
	if res := h.ok(&ScheduleCreate{ID: "p", Cron: "@hourly", Spec: s, Paused: true, NextFireAt: h.now + 1}).(*ScheduleResult); res.State != domain.SchedulePaused {
		t.Fatalf("created paused: %+v", res)
	}
}

func TestScheduleTriggerIsIdempotentByRunID(t *testing.T) {
	h := newSem(t)
	h.createSchedule("s1", domain.OverlapAllow)
	res := h.ok(&ScheduleTrigger{ID: "s1", RunID: "manual-1"}).(*FireResult)
	again := h.ok(&ScheduleTrigger{ID: "s1", RunID: "manual-1"}).(*FireResult)
	if !res.Changed || res.RunID != "manual-1" || again.Changed || again.RunID != "manual-1" {
		t.Fatalf("trigger %+v, again %+v", res, again)
	}
	h.wantCounts("s1", 1, 1, 0, 0)
	wantErr(t, h.apply(&ScheduleTrigger{ID: "nope", RunID: "x"}), ErrNotFound)
	wantErr(t, h.apply(&ScheduleTrigger{ID: "s1", RunID: "bad id"}), ErrInvalidArgument)
}

func TestScheduleCreateValidatesAndIsIdempotent(t *testing.T) {
	h := newSem(t)
	h.createSchedule("s1", "")
	spec, _ := domain.ParseSpec([]byte(schedSpec), domain.DefaultLimits)
	if res := h.ok(&ScheduleCreate{ID: "s1", Cron: "@daily", Spec: spec, NextFireAt: h.now + 5}).(*ScheduleResult); res.Created {
		t.Fatalf("second create: %+v", res)
	}
	before := stateDigest(t, h.f)
	for _, c := range []*ScheduleCreate{
		{ID: "bad id", IntervalMS: 1000, Spec: spec, NextFireAt: 1},
		{ID: "x", Spec: spec, NextFireAt: 1},
		{ID: "x", Cron: "@daily", IntervalMS: 1000, Spec: spec, NextFireAt: 1},
		{ID: "x", Cron: "@daily", Spec: spec},
		{ID: "x", Cron: "@daily", Spec: spec, NextFireAt: 1, Overlap: "sometimes"},
		{ID: "x", Cron: "@daily", Spec: spec, NextFireAt: 1, CatchupWindowMS: -1},
		{ID: "x", Cron: "@daily", Spec: domain.Spec{Name: "empty"}, NextFireAt: 1},
	} {
		if _, isErr := h.apply(c).(error); !isErr {
			t.Errorf("create %+v accepted", c)
		}
	}
	if stateDigest(t, h.f) != before {
		t.Fatal("a rejected create changed state")
	}
	if s := h.sched("s1"); s.CatchupWindowMS != domain.DefaultCatchupWindowMS || s.Overlap != domain.OverlapSkip {
		t.Fatalf("defaults: %+v", s)
	}
}

func TestScheduleRunIDIsAStableUUIDv7(t *testing.T) {
	id := domain.ScheduleRunID("s1", 1_700_000_001_000)
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("%s is not a UUIDv7", id)
	}
	if id != domain.ScheduleRunID("s1", 1_700_000_001_000) || id == domain.ScheduleRunID("s1", 1_700_000_002_000) || id == domain.ScheduleRunID("s2", 1_700_000_001_000) {
		t.Fatal("run ids are not a function of (schedule, fire time)")
	}
}

func TestSchedulesSurviveSnapshotRestore(t *testing.T) {
	h := newSem(t)
	h.createSchedule("s1", domain.OverlapBufferOne)
	h.fireDue("s1")
	h.fireDue("s1") // buffered
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = snap.WriteTo(&buf)
	snap.Release()
	if err != nil {
		t.Fatal(err)
	}
	f2, err := New(store.NewMemStore(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f2.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	d2, _, _ := f2.Digest()
	s2, _, err := f2.GetSchedule("s1")
	if err != nil || d2 != h.digest() || s2.BufferedAt == 0 || s2.Fires != 2 {
		t.Fatalf("restored: %+v %v, digest equal %v", s2, err, d2 == h.digest())
	}
}

// SchedulesChanged wakes the leader's schedule loop at a commit that
// changes a schedule, not at every commit.
func TestSchedulesChangedOnlyOnScheduleCommits(t *testing.T) {
	h := newHarness(t)
	ch := h.f.SchedulesChanged()
	h.submit("r1", `{"tasks":[{"key":"a","type":"t"}]}`)
	select {
	case <-ch:
		t.Fatal("a submit woke the schedule waiters")
	default:
	}
	h.createSchedule("s1", domain.OverlapAllow)
	select {
	case <-ch:
	default:
		t.Fatal("creating a schedule did not wake the schedule waiters")
	}
	ch = h.f.SchedulesChanged()
	h.ok(&SchedulePause{ID: "s1", Paused: true})
	select {
	case <-ch:
	default:
		t.Fatal("pausing a schedule did not wake the schedule waiters")
	}
}

// A replay is the operator's run, not the schedule's: from V2 it does not
// take the flowd.schedule label (below V2 it does, as every release did).
func TestReplayOfAScheduledRunDropsTheScheduleLabelFromV2(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		h := newSem(t)
		h.ok(&SetVersion{Version: v})
		h.createSchedule("s1", "")
		res := h.fireDue("s1")
		h.finish(res.RunID)
		newID := "replay"
		h.ok(&Replay{ParentID: res.RunID, NewID: newID})
		r, _ := h.run(newID)
		_, has := r.Labels[domain.ScheduleLabel]
		if has != (v < V2) || r.Labels["team"] != "data" {
			t.Fatalf("at V%d: replay labels %v, want the schedule label %v and team=data", v, r.Labels, v < V2)
		}
	}
}
