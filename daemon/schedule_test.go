package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/rpc/schedrpc"
)

// The schedule methods through a follower (forwarded to the leader): create,
// get with the next fire times, trigger, pause and resume, list, the runs
// linked by label, delete.
func TestScheduleMethodsThroughAFollower(t *testing.T) {
	agents := startAgents(t, 3)
	_, fs := followers(agents)
	c := client(t, fs[0])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wf := json.RawMessage(`{"name":"report","tasks":[{"key":"a","type":"echo"}]}`)

	if _, err := schedrpc.Create(ctx, c, schedrpc.CreateParams{ID: "bad", Cron: "61 * * * *", Workflow: wf}); !errors.Is(err, domain.ErrInvalidArgument) {
		t.Fatalf("bad cron: %v", err)
	}
	if _, err := schedrpc.Create(ctx, c, schedrpc.CreateParams{ID: "bad", Cron: "@hourly", Workflow: json.RawMessage(`{"tasks":[]}`)}); err == nil {
		t.Fatal("empty workflow accepted")
	}
	res, err := schedrpc.Create(ctx, c, schedrpc.CreateParams{ID: "nightly", Cron: "0 3 * * *", TimeZone: "Europe/Berlin",
		Workflow: wf, Labels: map[string]string{"team": "data"}, Overlap: "allow"})
	if err != nil || !res.Created || res.NextFireAt.IsZero() {
		t.Fatalf("create: %+v %v", res, err)
	}
	again, err := schedrpc.Create(ctx, c, schedrpc.CreateParams{ID: "nightly", Cron: "@hourly", Workflow: wf})
	if err != nil || again.Created {
		t.Fatalf("create again: %+v %v", again, err)
	}
	s, err := schedrpc.Get(ctx, c, "nightly", 0)
	if err != nil || len(s.NextFires) != 5 || s.State != "active" || s.Overlap != "allow" || len(s.Spec) == 0 {
		t.Fatalf("get: %+v %v", s, err)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for i, f := range s.NextFires {
		if l := f.In(berlin); l.Hour() != 3 || l.Minute() != 0 || (i > 0 && !f.After(s.NextFires[i-1])) {
			t.Fatalf("next fire %d is %s (%s in Berlin)", i, f, l)
		}
	}

	// Trigger now: a run labelled with the schedule, once per run id.
	tr, err := schedrpc.Trigger(ctx, c, schedrpc.TriggerParams{ID: "nightly", RunID: "0190a0a0-0000-7000-8000-0000000000aa"})
	if err != nil || !tr.Changed || tr.Outcome != "started" {
		t.Fatalf("trigger: %+v %v", tr, err)
	}
	if tr2, err := schedrpc.Trigger(ctx, c, schedrpc.TriggerParams{ID: "nightly", RunID: tr.RunID}); err != nil || tr2.Changed {
		t.Fatalf("trigger again: %+v %v", tr2, err)
	}
	runs, err := c.RunList(ctx, rpc.ListParams{Labels: map[string]string{domain.ScheduleLabel: "nightly"}})
	if err != nil || len(runs.Runs) != 1 || runs.Runs[0].ID != tr.RunID || runs.Runs[0].Labels["team"] != "data" {
		t.Fatalf("runs of the schedule: %+v %v", runs, err)
	}

	if ch, err := schedrpc.Pause(ctx, c, "nightly", "db migration", true); err != nil || !ch.Changed {
		t.Fatalf("pause: %+v %v", ch, err)
	}
	if s, err = schedrpc.Get(ctx, c, "nightly", 3); err != nil || s.State != "paused" || len(s.NextFires) != 0 || s.Note != "db migration" {
		t.Fatalf("paused: %+v %v", s, err)
	}
	if ch, err := schedrpc.Pause(ctx, c, "nightly", "", false); err != nil || !ch.Changed {
		t.Fatalf("resume: %+v %v", ch, err)
	}
	list, err := schedrpc.List(ctx, c)
	if err != nil || len(list.Schedules) != 1 || list.Schedules[0].State != "active" || list.Schedules[0].Started != 1 || list.Schedules[0].NextFireAt.IsZero() {
		t.Fatalf("list: %+v %v", list, err)
	}
	if ch, err := schedrpc.Delete(ctx, c, "nightly"); err != nil || !ch.Changed {
		t.Fatalf("delete: %+v %v", ch, err)
	}
	if _, err := schedrpc.Get(ctx, c, "nightly", 0); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := schedrpc.Trigger(ctx, c, schedrpc.TriggerParams{ID: "nightly"}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("trigger after delete: %v", err)
	}
}

// An interval schedule fires on its own, from the leader's loop, each fire
// time once (the handlers over a one-node cluster: no socket is under test).
func TestIntervalScheduleFires(t *testing.T) {
	a, _ := oneNodeAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := a.scheduleCreate(ctx, schedrpc.CreateParams{ID: "tick", IntervalMS: 1000, Overlap: "allow",
		Workflow: json.RawMessage(`{"name":"tick","tasks":[{"key":"a","type":"echo"}]}`)}); err != nil {
		t.Fatal(err)
	}
	var s schedrpc.Schedule
	for {
		var err error
		if s, err = a.scheduleGet(ctx, schedrpc.IDParams{ID: "tick", Next: 1}); err != nil {
			t.Fatal(err)
		}
		if s.Fires >= 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no two fires: %+v", s)
		case <-time.After(100 * time.Millisecond): // polling the schedule's counters
		}
	}
	if s.Started != s.Fires || s.Missed != 0 || s.LastFireAt.UnixMilli()%1000 != 0 {
		t.Fatalf("after fires: %+v", s)
	}
	runs, err := a.runList(ctx, rpc.ListParams{Labels: map[string]string{domain.ScheduleLabel: "tick"}})
	if err != nil || uint64(len(runs.Runs)) < s.Started {
		t.Fatalf("runs: %d for %d started (%v)", len(runs.Runs), s.Started, err)
	}
	// The counters are exported as metrics.
	mfs, err := a.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue()
		}
	}
	if got["flowd_schedule_fires_total,schedule=tick"] < 2 || got["flowd_schedule_runs_started_total,schedule=tick"] < 2 {
		t.Fatalf("schedule metrics: %v", got)
	}
	if v, ok := got["flowd_schedule_skipped_fires_total,reason=missed,schedule=tick"]; !ok || v != 0 {
		t.Fatalf("missed fires metric: %v %v", v, ok)
	}
}

// A schedule's active runs are those still running when read: a run that
// finished leaves schedule.get and schedule.list at once, not at the next
// fire (a day later for a nightly schedule).
func TestScheduleActiveRunsDropFinishedOnRead(t *testing.T) {
	agents := startAgents(t, 3)
	_, fs := followers(agents)
	c := client(t, fs[0])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wf := json.RawMessage(`{"name":"report","tasks":[{"key":"a","type":"echo"}]}`)
	if _, err := schedrpc.Create(ctx, c, schedrpc.CreateParams{ID: "nightly", Cron: "0 3 * * *", Workflow: wf}); err != nil {
		t.Fatal(err)
	}
	tr, err := schedrpc.Trigger(ctx, c, schedrpc.TriggerParams{ID: "nightly"})
	if err != nil || tr.Outcome != "started" {
		t.Fatalf("trigger: %+v %v", tr, err)
	}
	s, err := schedrpc.Get(ctx, c, "nightly", 0)
	if err != nil || len(s.ActiveRuns) != 1 || s.ActiveRuns[0] != tr.RunID {
		t.Fatalf("while its run runs: active %q %v", s.ActiveRuns, err)
	}
	if _, err := c.RunVerb(ctx, rpc.MethodRunCancel, tr.RunID, "done with it"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunWait(ctx, tr.RunID, 5000); err != nil {
		t.Fatal(err)
	}
	if s, err = schedrpc.Get(ctx, c, "nightly", 0); err != nil || len(s.ActiveRuns) != 0 {
		t.Fatalf("after its run ended: active %q %v", s.ActiveRuns, err)
	}
	list, err := schedrpc.List(ctx, c)
	if err != nil || len(list.Schedules) != 1 || len(list.Schedules[0].ActiveRuns) != 0 {
		t.Fatalf("list after its run ended: %+v %v", list, err)
	}
}
