package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/cronexpr"
	"pgregory.net/rapid"
)

// The model's schedules and workflow definitions. Fire times are computed
// as the leader computes them (cronexpr, from the schedule record the
// leader reads; see cluster/raftnode/schedules.go), and every fire is proposed a
// second time, as a new leader would re-propose it, which must be a lost
// race. Runs a schedule or a definition starts join the task model.

// TestModelSchedulesAndDefinitions runs the model with schedules and
// definitions next to the task commands that finish their runs (so
// overlap policies meet active and done runs); replay must give the same
// digest in any batch sizes.
func TestModelSchedulesAndDefinitions(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(rapidTB{TB: t, rt: rt})
		h.ok(&SettingsSet{BreakerFailures: ptr(-1)})
		h.ok(&SetVersion{Version: MaxVersion})
		m := &model{h: h}
		rt.Repeat(map[string]func(*rapid.T){
			"schedule_create":   m.schedCreate,
			"schedule_fire":     m.schedFire,
			"schedule_fire_2":   m.schedFire,
			"schedule_trigger":  m.schedTrigger,
			"schedule_pause":    m.schedPause,
			"schedule_delete":   m.schedDelete,
			"definition_put":    m.defPut,
			"submit_definition": m.defSubmit,
			"claim":             m.claim,
			"complete":          m.complete,
			"complete_2":        m.complete,
			"fail":              m.fail,
			"heartbeat":         m.heartbeat,
			"stale":             m.stale,
			"reap":              m.reap,
			"tick":              m.tick,
			"signal":            m.signal,
			"verb":              m.verb,
			"":                  m.check,
		})
		checkReplay(h.t, h, 2, rapid.Uint64().Draw(rt, "replay_seed"))
	})
}

// maxModelRuns bounds the runs fires, triggers and definition submits add.
const maxModelRuns = 16

type mSched struct {
	id, cron, tz   string
	interval       int64
	overlap        domain.Overlap
	window         int64
	spec           domain.Spec
	paused         bool
	next, lastFire int64
	lastRun        string
	active         []string
	bufAt          int64
	bufRun         string
	fires, started uint64
	skipped        uint64
	missed         uint64
	trigger        string // the last trigger's run id, for a re-send
}

type mStored struct {
	scheds []*mSched        // by id
	defs   map[string][]int // definition name -> the spec variant of each version
	seq    int
}

// digestNoClock hashes every key but the applied index and the FSM's
// clock: what an entry that loses a race leaves untouched even when the
// clock moved since the entry before it (a fire pass may move it without
// proposing anything).
func (m *model) digestNoClock() string {
	sum := sha256.New()
	err := m.h.f.View(func(r Reader) error {
		return r.Scan(nil, nil, false, func(k, v []byte) bool {
			if !bytes.Equal(k, keyApplied) && !bytes.Equal(k, keyNow) {
				fmt.Fprintf(sum, "%d:%s=%d:%s;", len(k), k, len(v), v)
			}
			return true
		})
	})
	if err != nil {
		m.h.t.Fatal(err)
	}
	return hex.EncodeToString(sum.Sum(nil))
}

func (m *model) sched(id string) *mSched {
	for _, s := range m.scheds {
		if s.id == id {
			return s
		}
	}
	return nil
}

func (s *mSched) expr(rt *rapid.T) *cronexpr.Expr {
	e, err := cronexpr.Parse(s.cron, s.tz, s.interval)
	if err != nil {
		rt.Fatal(err)
	}
	return e
}

func (m *model) schedCreate(rt *rapid.T) {
	id := rapid.SampledFrom([]string{"s0", "s1"}).Draw(rt, "schedule")
	s := &mSched{id: id}
	switch rapid.IntRange(0, 3).Draw(rt, "timing") {
	case 0:
		s.interval = 1000
	case 1:
		s.interval = 2500
	case 2:
		s.cron = "@every 2s"
	default:
		s.cron, s.tz = "* * * * *", "Europe/Berlin"
	}
	overlap := rapid.SampledFrom([]domain.Overlap{"", domain.OverlapSkip, domain.OverlapBufferOne,
		domain.OverlapAllow, domain.OverlapCancelOther}).Draw(rt, "overlap")
	window := rapid.SampledFrom([]int64{0, 1000, 3000}).Draw(rt, "catchup_window")
	s.spec = drawSpec(rt, 2)
	s.spec.Name = "wf-" + id
	s.paused = rapid.IntRange(0, 4).Draw(rt, "paused") == 0
	first := s.expr(rt).First(m.now())
	cmd := &ScheduleCreate{ID: id, Cron: s.cron, TZ: s.tz, IntervalMS: s.interval, Spec: s.spec,
		Overlap: overlap, CatchupWindowMS: window, Paused: s.paused, NextFireAt: first}
	if old := m.sched(id); old != nil {
		// Idempotent by id: the schedule stays as it is.
		before := m.digestNoClock()
		res := m.h.ok(cmd).(*ScheduleResult)
		if res.Created || m.digestNoClock() != before {
			rt.Fatalf("re-create of schedule %s: %+v (or it changed state)", id, res)
		}
		return
	}
	res := m.h.ok(cmd).(*ScheduleResult)
	want := domain.ScheduleActive
	if s.paused {
		want = domain.SchedulePaused
	}
	if !res.Created || res.State != want {
		rt.Fatalf("create of schedule %s: %+v, want created %s", id, res, want)
	}
	s.overlap, s.window, s.next = overlap, window, first
	if s.overlap == "" {
		s.overlap = domain.OverlapSkip
	}
	if s.window == 0 {
		s.window = domain.DefaultCatchupWindowMS
	}
	m.scheds = append(m.scheds, s)
	slices.SortFunc(m.scheds, func(a, b *mSched) int { return strings.Compare(a.id, b.id) })
}

// schedFire is one pass of the leader's deadline loop after the clock
// moved: releases of buffered fires whose runs are done, then the fires
// that are due, each proposed twice.
func (m *model) schedFire(rt *rapid.T) {
	if len(m.scheds) == 0 {
		m.schedCreate(rt)
		return
	}
	if len(m.runs) >= maxModelRuns {
		rt.Skip("enough runs")
	}
	// Mostly to the next fire time (and a little or well past it).
	next := int64(0)
	for _, s := range m.scheds {
		if !s.paused && (next == 0 || s.next < next) {
			next = s.next
		}
	}
	if next > m.now() && rapid.IntRange(0, 3).Draw(rt, "to_next_fire") > 0 {
		m.h.now = next
	}
	m.h.now += rapid.SampledFrom([]int64{0, 1, 700, 2600, 5000}).Draw(rt, "advance")
	recs, err := m.h.f.Schedules()
	if err != nil {
		rt.Fatal(err)
	}
	for i := range recs {
		rec := &recs[i]
		if rec.State != domain.ScheduleActive {
			continue
		}
		s := m.sched(rec.ID)
		if s == nil {
			rt.Fatalf("schedule %s is not in the model", rec.ID)
		}
		if rec.BufferedAt != 0 && m.h.f.ScheduleRunsDone(rec.Active) {
			m.proposeFire(rt, s, &ScheduleFire{ID: rec.ID, Release: true, FireAt: rec.BufferedAt})
		}
		if rec.NextFireAt == 0 || rec.NextFireAt > m.now() {
			continue
		}
		e, err := cronexpr.Parse(rec.Cron, rec.TZ, rec.IntervalMS)
		if err != nil {
			rt.Fatal(err)
		}
		fireAt, next, missed, from, to := e.CatchUp(rec.NextFireAt, m.now(), rec.CatchupWindowMS)
		m.proposeFire(rt, s, &ScheduleFire{ID: rec.ID, Due: rec.NextFireAt, FireAt: fireAt, Next: next,
			Missed: missed, MissedFrom: from, MissedTo: to})
	}
}

// proposeFire applies a fire, checks it against the model, and applies it
// again (a failover's re-proposal): that must change nothing.
func (m *model) proposeFire(rt *rapid.T, s *mSched, c *ScheduleFire) {
	res := m.h.ok(c).(*FireResult)
	want := &FireResult{}
	switch {
	case s.paused:
	case c.Release:
		if s.bufAt != 0 && s.bufAt == c.FireAt && m.refreshActive(s) == 0 {
			id := s.bufRun
			s.bufAt, s.bufRun = 0, ""
			m.startScheduled(s, id)
			want = &FireResult{Changed: true, Outcome: domain.OutcomeStarted, RunID: id}
		}
	case s.next != 0 && s.next == c.Due:
		s.missed += uint64(c.Missed)
		s.next = c.Next
		want = &FireResult{Changed: true}
		if c.FireAt != 0 {
			want = m.fire(s, c.FireAt, domain.ScheduleRunID(s.id, c.FireAt))
		}
	}
	if *res != *want {
		rt.Fatalf("fire %+v of schedule %s: %+v, model %+v", c, s.id, res, want)
	}
	before := m.digestNoClock()
	if again := m.h.ok(c).(*FireResult); again.Changed || m.digestNoClock() != before {
		rt.Fatalf("fire %+v of schedule %s proposed again: %+v (or it changed state)", c, s.id, again)
	}
}

// refreshActive drops the done runs from s.active.
func (m *model) refreshActive(s *mSched) int {
	var keep []string
	for _, id := range s.active {
		if r := m.run(id); r != nil && !r.state.Done() {
			keep = append(keep, id)
		}
	}
	s.active = keep
	return len(keep)
}

// fire is one fire under the overlap policy: with no active run it starts
// one; otherwise allow starts one, cancel_other cancels the active runs
// and starts one, buffer_one keeps one fire for later, skip (and a second
// buffered fire) skips.
func (m *model) fire(s *mSched, at int64, runID string) *FireResult {
	active := m.refreshActive(s)
	s.fires++
	s.lastFire = at
	res := &FireResult{Changed: true}
	switch {
	case active == 0 || s.overlap == domain.OverlapAllow:
		res.Outcome = domain.OutcomeStarted
	case s.overlap == domain.OverlapCancelOther:
		for _, id := range s.active {
			m.cancelRun(m.run(id))
		}
		s.active = nil
		res.Outcome = domain.OutcomeStarted
	case s.overlap == domain.OverlapBufferOne && s.bufAt == 0:
		res.Outcome = domain.OutcomeBuffered
		s.bufAt, s.bufRun = at, runID
		res.RunID = runID
	default:
		res.Outcome = domain.OutcomeSkipped
		s.skipped++
	}
	if res.Outcome == domain.OutcomeStarted {
		m.startScheduled(s, runID)
		res.RunID = runID
	}
	return res
}

func (m *model) startScheduled(s *mSched, id string) {
	if m.run(id) == nil {
		m.addRun(id, s.spec)
	}
	s.started++
	s.lastRun = id
	s.active = append(s.active, id)
}

func (m *model) schedTrigger(rt *rapid.T) {
	if len(m.runs) >= maxModelRuns {
		rt.Skip("enough runs")
	}
	id := rapid.SampledFrom([]string{"s0", "s1"}).Draw(rt, "schedule")
	s := m.sched(id)
	if s == nil {
		wantErr(m.h.t, m.h.apply(&ScheduleTrigger{ID: id, RunID: "trig-none"}), ErrNotFound)
		return
	}
	m.seq++
	runID := fmt.Sprintf("trig-%d", m.seq)
	if s.trigger != "" && rapid.Bool().Draw(rt, "resend") {
		runID = s.trigger
	}
	before := m.digestNoClock()
	res := m.h.ok(&ScheduleTrigger{ID: id, RunID: runID}).(*FireResult)
	if m.run(runID) != nil || s.bufRun == runID {
		if *res != (FireResult{RunID: runID}) || m.digestNoClock() != before {
			rt.Fatalf("re-sent trigger %s of %s: %+v (or it changed state)", runID, id, res)
		}
		return
	}
	s.trigger = runID
	if want := m.fire(s, m.now(), runID); *res != *want {
		rt.Fatalf("trigger of %s: %+v, model %+v", id, res, want)
	}
}

func (m *model) schedPause(rt *rapid.T) {
	id := rapid.SampledFrom([]string{"s0", "s1"}).Draw(rt, "schedule")
	pause := rapid.Bool().Draw(rt, "pause")
	s := m.sched(id)
	cmd := &SchedulePause{ID: id, Paused: pause}
	if s == nil {
		cmd.Next = m.now() + 1000
		wantErr(m.h.t, m.h.apply(cmd), ErrNotFound)
		return
	}
	if !pause {
		// Fires missed while paused are not caught up.
		cmd.Next = s.expr(rt).First(m.now())
	}
	changed := m.h.ok(cmd).(*ChangedResult).Changed
	want := s.paused != pause
	if changed != want {
		rt.Fatalf("pause %v of schedule %s (paused %v): changed %v", pause, id, s.paused, changed)
	}
	if want {
		s.paused = pause
		if !pause {
			s.next = cmd.Next
		}
	}
}

func (m *model) schedDelete(rt *rapid.T) {
	id := rapid.SampledFrom([]string{"s0", "s1"}).Draw(rt, "schedule")
	s := m.sched(id)
	if changed := m.h.ok(&ScheduleDelete{ID: id}).(*ChangedResult).Changed; changed != (s != nil) {
		rt.Fatalf("delete of schedule %s (exists %v): changed %v", id, s != nil, changed)
	}
	m.scheds = slices.DeleteFunc(m.scheds, func(x *mSched) bool { return x.id == id })
}

// ---- definitions ----

// mDefSpec is spec variant v of definition name.
func mDefSpec(name string, v int) domain.Spec {
	one := &domain.RetryPolicy{MaxAttempts: 1}
	spec := domain.Spec{Name: name, Tasks: []domain.TaskSpec{{Key: "k0", Type: []string{"a", "b", "a"}[v], LeaseMS: 1000, Retry: one}}}
	if v == 2 {
		spec.Tasks = append(spec.Tasks, domain.TaskSpec{Key: "k1", Type: "b", Deps: []string{"k0"}, LeaseMS: 1000, Retry: one})
	}
	return spec
}

func (m *model) defPut(rt *rapid.T) {
	name := rapid.SampledFrom([]string{"d0", "d1"}).Draw(rt, "definition")
	variant := rapid.IntRange(0, 2).Draw(rt, "variant")
	vs := m.defs[name]
	latest := len(vs)
	asked := 0
	if rapid.Bool().Draw(rt, "versioned") {
		asked = rapid.IntRange(1, latest+2).Draw(rt, "version")
	}
	before := m.digestNoClock()
	res := m.h.apply(&DefinitionPut{Name: name, Version: asked, Spec: mDefSpec(name, variant)})
	var want *DefinitionResult
	switch {
	case asked == 0 && latest > 0 && vs[latest-1] == variant:
		want = &DefinitionResult{Name: name, Version: latest}
	case asked == 0 || asked == latest+1:
		want = &DefinitionResult{Name: name, Version: latest + 1, Created: true}
	case asked <= latest && vs[asked-1] == variant:
		want = &DefinitionResult{Name: name, Version: asked}
	}
	if want == nil { // another spec under a stored version, or a gap
		if err, ok := res.(error); !ok || !errors.Is(err, ErrInvalidArgument) || m.digestNoClock() != before {
			rt.Fatalf("put of %s@%d (variant %d, versions %v): %#v, want an invalid-argument error and no change", name, asked, variant, vs, res)
		}
		return
	}
	got, ok := res.(*DefinitionResult)
	if !ok || *got != *want {
		rt.Fatalf("put of %s@%d (variant %d, versions %v): %#v, want %+v", name, asked, variant, vs, res, want)
	}
	if want.Created {
		if m.defs == nil {
			m.defs = map[string][]int{}
		}
		m.defs[name] = append(vs, variant)
	} else if m.digestNoClock() != before {
		rt.Fatalf("put of %s@%d: a retry changed state", name, asked)
	}
}

func (m *model) defSubmit(rt *rapid.T) {
	if len(m.runs) >= maxModelRuns {
		rt.Skip("enough runs")
	}
	name := rapid.SampledFrom([]string{"d0", "d1"}).Draw(rt, "definition")
	vs := m.defs[name]
	version := 0
	if rapid.Bool().Draw(rt, "pinned") {
		version = rapid.IntRange(1, len(vs)+1).Draw(rt, "version")
	}
	m.seq++
	id := fmt.Sprintf("def-%d", m.seq)
	var prev []string
	for _, r := range m.runs {
		if r.def != "" {
			prev = append(prev, r.id)
		}
	}
	if len(prev) > 0 && rapid.Bool().Draw(rt, "resend") {
		id = rapid.SampledFrom(prev).Draw(rt, "run")
	}
	before := m.digestNoClock()
	res := m.h.apply(&SubmitDefinition{Definition: name, Version: version, ID: id})
	if r := m.run(id); r != nil {
		if sr, ok := res.(*SubmitResult); !ok || sr.Created || m.digestNoClock() != before {
			rt.Fatalf("re-submit of %s by %s@%d: %#v (or it changed state)", id, name, version, res)
		}
		return
	}
	v := version
	if v == 0 {
		v = len(vs)
	}
	if v == 0 || v > len(vs) {
		wantErr(m.h.t, res, ErrNotFound)
		if m.digestNoClock() != before {
			rt.Fatalf("submit by unknown %s@%d changed state", name, version)
		}
		return
	}
	r := m.addRun(id, mDefSpec(name, vs[v-1]))
	if sr, ok := res.(*SubmitResult); !ok || !sr.Created || sr.State != r.state {
		rt.Fatalf("submit of %s by %s@%d: %#v, model says %s", id, name, version, res, r.state)
	}
	r.def, r.defV = name, v
}

// checkStored compares schedules, definitions and the definition runs
// record with the model.
func (m *model) checkStored(rt *rapid.T) {
	f := m.h.f
	recs, err := f.Schedules()
	if err != nil {
		rt.Fatal(err)
	}
	if len(recs) != len(m.scheds) {
		rt.Fatalf("%d schedules, model %d", len(recs), len(m.scheds))
	}
	for i, rec := range recs {
		s := m.scheds[i]
		state := domain.ScheduleActive
		if s.paused {
			state = domain.SchedulePaused
		}
		if rec.ID != s.id || rec.State != state || rec.NextFireAt != s.next || rec.LastFireAt != s.lastFire ||
			rec.LastRunID != s.lastRun || !slices.Equal(rec.Active, s.active) || rec.BufferedAt != s.bufAt ||
			rec.BufferedRun != s.bufRun || rec.Fires != s.fires || rec.Started != s.started ||
			rec.Skipped != s.skipped || rec.Missed != s.missed || rec.Overlap != s.overlap || rec.CatchupWindowMS != s.window {
			rt.Fatalf("schedule %+v, model %+v", rec, *s)
		}
	}
	defs, err := f.Definitions()
	if err != nil {
		rt.Fatal(err)
	}
	if len(defs) != len(m.defs)+len(m.childDefs) {
		rt.Fatalf("%d definitions, model %d", len(defs), len(m.defs)+len(m.childDefs))
	}
	for _, d := range defs {
		if _, child := m.childDefs[d.Latest.Name]; child { // stored once, before any command
			if d.Versions != 1 {
				rt.Fatalf("child definition %s has %d versions", d.Latest.Name, d.Versions)
			}
			continue
		}
		vs := m.defs[d.Latest.Name]
		if d.Versions != len(vs) || d.Latest.Version != len(vs) {
			rt.Fatalf("definition %s: %d versions, latest %d; model %d", d.Latest.Name, d.Versions, d.Latest.Version, len(vs))
		}
		stored, err := f.DefinitionVersions(d.Latest.Name)
		if err != nil {
			rt.Fatal(err)
		}
		for i, sd := range stored {
			got, _ := json.Marshal(sd.Spec)
			want, _ := json.Marshal(mDefSpec(sd.Name, vs[i]))
			if sd.Version != i+1 || string(got) != string(want) {
				rt.Fatalf("definition %s@%d holds %s, model (version %d) %s", sd.Name, sd.Version, got, i+1, want)
			}
		}
	}
	for _, r := range m.runs {
		if r.def == "" {
			continue
		}
		run, _, err := f.GetRun(r.id)
		if err != nil {
			rt.Fatal(err)
		}
		if run.Definition != r.def || run.DefinitionVersion != r.defV {
			rt.Fatalf("run %s records definition %s@%d, model %s@%d", r.id, run.Definition, run.DefinitionVersion, r.def, r.defV)
		}
	}
}
