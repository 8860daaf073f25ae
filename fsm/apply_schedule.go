package fsm

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// Schedules: a schedule starts a run of its frozen workflow at each fire
// time. The state machine never parses a cron expression: the leader
// computes fire times (internal/cronexpr) and puts them in the commands,
// so Apply only checks them against the record. A scheduled fire names the
// fire time it answers (ScheduleFire.Due); it applies only while the record
// still waits for that time, so a fire re-proposed after a failover is a
// lost race, never a second run, and the run's id is derived from
// (schedule, fire time) as well.
//
//	sc/<id>    Schedule (JSON; mirrored in memory)
//	ssp/<id>   ScheduleBody: the frozen spec and input, written once

var (
	pfxSchedule     = []byte("sc/")
	pfxScheduleBody = []byte("ssp/")
)

func scheduleKey(id string) []byte     { return cat(pfxSchedule, []byte(id)) }
func scheduleBodyKey(id string) []byte { return cat(pfxScheduleBody, []byte(id)) }

// Schedule is a schedule's record.
type Schedule struct {
	ID    string               `json:"id"`
	State domain.ScheduleState `json:"state"`
	// Timing: Cron (with TZ) or IntervalMS, as given; only the leader and
	// readers parse it.
	Cron            string            `json:"cron,omitempty"`
	TZ              string            `json:"tz,omitempty"`
	IntervalMS      int64             `json:"interval_ms,omitempty"`
	Workflow        string            `json:"workflow"`
	Labels          map[string]string `json:"labels,omitempty"`
	Overlap         domain.Overlap    `json:"overlap"`
	CatchupWindowMS int64             `json:"catchup_window_ms"`
	Note            string            `json:"note,omitempty"`
	// NextFireAt is the fire time the schedule waits for (0: never again).
	NextFireAt int64  `json:"next_fire_at"`
	LastFireAt int64  `json:"last_fire_at,omitempty"`
	LastRunID  string `json:"last_run_id,omitempty"`
	// Active lists the runs it started that were not done when last looked at.
	Active []string `json:"active,omitempty"`
	// BufferedAt is a fire waiting for Active to finish (buffer_one), which
	// will start run BufferedRun.
	BufferedAt  int64  `json:"buffered_at,omitempty"`
	BufferedRun string `json:"buffered_run,omitempty"`
	// Counters: fires (scheduled and triggered), runs started, fires the
	// overlap policy skipped, fires missed (older than the catch-up window).
	Fires   uint64 `json:"fires"`
	Started uint64 `json:"started"`
	Skipped uint64 `json:"skipped"`
	Missed  uint64 `json:"missed"`

	CreatedAt   int64  `json:"created_at"`
	CreateIndex uint64 `json:"create_index"`
}

// ScheduleBody is what each fire starts: the frozen spec and input.
type ScheduleBody struct {
	Spec  domain.Spec     `json:"spec"`
	Input json.RawMessage `json:"input,omitempty"`
}

// ScheduleCreate creates a schedule (idempotent by ID). NextFireAt is the
// first fire time, computed by the leader.
type ScheduleCreate struct {
	Stamped
	ID              string            `json:"id"`
	Cron            string            `json:"cron,omitempty"`
	TZ              string            `json:"tz,omitempty"`
	IntervalMS      int64             `json:"interval_ms,omitempty"`
	Spec            domain.Spec       `json:"spec"`
	Input           json.RawMessage   `json:"input,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	Overlap         domain.Overlap    `json:"overlap,omitempty"`
	CatchupWindowMS int64             `json:"catchup_window_ms,omitempty"`
	Paused          bool              `json:"paused,omitempty"`
	Note            string            `json:"note,omitempty"`
	NextFireAt      int64             `json:"next_fire_at"`
}

// ScheduleFire is a fire the leader found due. It applies only while the
// schedule waits for Due (its NextFireAt): Missed fire times older than
// the catch-up window (MissedFrom..MissedTo) are counted, FireAt (0: none
// within the window) fires, and the schedule then waits for Next. With
// Release it starts the buffered fire at FireAt instead (Due unused).
type ScheduleFire struct {
	Stamped
	ID         string `json:"id"`
	Due        int64  `json:"due"`
	FireAt     int64  `json:"fire_at,omitempty"`
	Next       int64  `json:"next"`
	Missed     int    `json:"missed,omitempty"`
	MissedFrom int64  `json:"missed_from,omitempty"`
	MissedTo   int64  `json:"missed_to,omitempty"`
	Release    bool   `json:"release,omitempty"`
}

// SchedulePause pauses or resumes a schedule; a resumed schedule waits for
// Next (the leader's first fire time after now: fires missed while paused
// are not caught up).
type SchedulePause struct {
	Stamped
	ID     string `json:"id"`
	Paused bool   `json:"paused"`
	Next   int64  `json:"next,omitempty"`
	Note   string `json:"note,omitempty"`
}

// ScheduleTrigger fires a schedule now (under its overlap policy),
// starting run RunID; idempotent by RunID.
type ScheduleTrigger struct {
	Stamped
	ID    string `json:"id"`
	RunID string `json:"run_id"`
}

// ScheduleDelete removes a schedule; the runs it started stay.
type ScheduleDelete struct {
	Stamped
	ID string `json:"id"`
}

func (*ScheduleCreate) Type() MsgType  { return MsgScheduleCreate }
func (*ScheduleFire) Type() MsgType    { return MsgScheduleFire }
func (*SchedulePause) Type() MsgType   { return MsgSchedulePause }
func (*ScheduleTrigger) Type() MsgType { return MsgScheduleTrigger }
func (*ScheduleDelete) Type() MsgType  { return MsgScheduleDelete }

// ScheduleResult answers schedule.create.
type ScheduleResult struct {
	ID      string               `json:"id"`
	State   domain.ScheduleState `json:"state"`
	Created bool                 `json:"created"`
}

// FireResult answers a fire or a trigger. Changed false: the fire was
// already applied (a lost race), nothing happened.
type FireResult struct {
	Changed bool                   `json:"changed"`
	Outcome domain.ScheduleOutcome `json:"outcome,omitempty"`
	RunID   string                 `json:"run_id,omitempty"`
}

// FireTime renders a fire time in events: RFC 3339, UTC, milliseconds.
func FireTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func (a *applier) loadSchedule(id string) *Schedule {
	s, err := getJSON[Schedule](a.tx, scheduleKey(id))
	must(err)
	return s
}

func (a *applier) saveSchedule(s *Schedule) { a.put(scheduleKey(s.ID), s) }

func (a *applier) scheduleEvent(s *Schedule, transition, from, to, runID string) {
	a.emit(Event{Kind: "schedule", Name: s.ID, Transition: transition, From: from, To: to, RunID: runID})
}

func (a *applier) applyScheduleCreate(c *ScheduleCreate) any {
	if err := domain.ValidateScheduleID(c.ID, a.limits); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if s := a.loadSchedule(c.ID); s != nil {
		return &ScheduleResult{ID: s.ID, State: s.State}
	}
	switch {
	case (c.Cron == "") == (c.IntervalMS == 0):
		return fmt.Errorf("%w: a schedule needs a cron expression or an interval (one of them)", ErrInvalidArgument)
	case c.IntervalMS < 0:
		return fmt.Errorf("%w: interval_ms %d must be > 0", ErrInvalidArgument, c.IntervalMS)
	case c.NextFireAt <= 0:
		return fmt.Errorf("%w: the schedule never fires", ErrInvalidArgument)
	case !domain.ValidOverlap(c.Overlap):
		return fmt.Errorf("%w: overlap %q must be skip, buffer_one, allow or cancel_other", ErrInvalidArgument, c.Overlap)
	case c.CatchupWindowMS < 0 || c.CatchupWindowMS > domain.MaxCatchupWindowMS:
		return fmt.Errorf("%w: catchup_window_ms %d must be 0 (default) to %d", ErrInvalidArgument, c.CatchupWindowMS, domain.MaxCatchupWindowMS)
	case len(c.Note) > 1024:
		return fmt.Errorf("%w: note is over 1024 bytes", ErrInvalidArgument)
	}
	c.Spec = a.versioned(c.Spec)
	if err := a.validSpec(c.Spec); err != nil {
		return err
	}
	labels := scheduleLabels(c.Labels, c.ID)
	if err := a.checkRunInput(c.Input, labels, ""); err != nil {
		return err
	}
	s := &Schedule{
		ID: c.ID, State: domain.ScheduleActive, Cron: c.Cron, TZ: c.TZ, IntervalMS: c.IntervalMS,
		Workflow: c.Spec.Name, Labels: c.Labels, Overlap: c.Overlap, CatchupWindowMS: c.CatchupWindowMS,
		Note: c.Note, NextFireAt: c.NextFireAt, CreatedAt: a.now, CreateIndex: a.index,
	}
	if s.Overlap == "" {
		s.Overlap = domain.OverlapSkip
	}
	if s.CatchupWindowMS == 0 {
		s.CatchupWindowMS = domain.DefaultCatchupWindowMS
	}
	a.put(scheduleBodyKey(c.ID), ScheduleBody{Spec: c.Spec.NormalizeWith(a.getSettings().DefaultMaxAttempts), Input: c.Input})
	a.scheduleEvent(s, "create", "", string(domain.ScheduleActive), "")
	if c.Paused {
		a.stepSchedule(s, domain.EdgeSchedulePause)
	}
	a.saveSchedule(s)
	return &ScheduleResult{ID: s.ID, State: s.State, Created: true}
}

// scheduleLabels are the labels of a run the schedule starts: its own
// plus the schedule label.
func scheduleLabels(own map[string]string, id string) map[string]string {
	out := maps.Clone(own)
	if out == nil {
		out = map[string]string{}
	}
	out[domain.ScheduleLabel] = id
	return out
}

func (a *applier) stepSchedule(s *Schedule, edge string) {
	from := s.State
	to, err := domain.ScheduleMachine.Step(from, edge)
	must(err)
	s.State = to
	a.scheduleEvent(s, edge, string(from), string(to), "")
}

func (a *applier) applyScheduleFire(c *ScheduleFire) any {
	s := a.loadSchedule(c.ID)
	if s == nil || s.State != domain.ScheduleActive {
		return &FireResult{} // deleted or paused meanwhile: a lost race
	}
	if c.Release {
		if c.FireAt == 0 || s.BufferedAt != c.FireAt || a.refreshActive(s) > 0 {
			return &FireResult{}
		}
		runID := s.BufferedRun
		s.BufferedAt, s.BufferedRun = 0, ""
		res := &FireResult{Changed: true, Outcome: domain.OutcomeStarted, RunID: a.startScheduled(s, runID)}
		a.scheduleEvent(s, "release", FireTime(c.FireAt), string(res.Outcome), res.RunID)
		a.saveSchedule(s)
		return res
	}
	if s.NextFireAt == 0 || s.NextFireAt != c.Due {
		return &FireResult{} // already fired (or never fires): a lost race
	}
	// The fire times must move forward and never fire early.
	switch {
	case c.FireAt != 0 && (c.FireAt < c.Due || c.FireAt > a.now):
		return fmt.Errorf("%w: fire at %s is outside %s..%s", ErrInvalidArgument, FireTime(c.FireAt), FireTime(c.Due), FireTime(a.now))
	case c.Next != 0 && c.Next <= max(c.Due, c.FireAt):
		return fmt.Errorf("%w: next fire %s is not after %s", ErrInvalidArgument, FireTime(c.Next), FireTime(max(c.Due, c.FireAt)))
	case c.Missed < 0 || (c.Missed == 0) != (c.FireAt == c.Due):
		return fmt.Errorf("%w: %d missed fires do not match due %s and fire %s", ErrInvalidArgument, c.Missed, FireTime(c.Due), FireTime(c.FireAt))
	}
	if c.Missed > 0 {
		s.Missed += uint64(c.Missed)
		a.scheduleEvent(s, "missed", FireTime(c.MissedFrom), FireTime(c.MissedTo), "")
	}
	s.NextFireAt = c.Next
	res := &FireResult{Changed: true}
	if c.FireAt != 0 {
		res = a.fire(s, c.FireAt, domain.ScheduleRunID(s.ID, c.FireAt), "fire")
	}
	a.saveSchedule(s)
	return res
}

func (a *applier) applyScheduleTrigger(c *ScheduleTrigger) any {
	s := a.loadSchedule(c.ID)
	if s == nil {
		return fmt.Errorf("%w: schedule %s; list them with `flowd schedule list`", ErrNotFound, c.ID)
	}
	if !ValidRunID(c.RunID) {
		return fmt.Errorf("%w: run id %q must be 1-64 letters, digits, '_', '.', ':' or '-' (a UUID)", ErrInvalidArgument, c.RunID)
	}
	if a.loadRun(c.RunID) != nil || s.BufferedRun == c.RunID {
		return &FireResult{RunID: c.RunID} // a retry of a trigger that applied
	}
	res := a.fire(s, a.now, c.RunID, "trigger")
	a.saveSchedule(s)
	return res
}

// fire applies one fire at fireAt under the overlap policy.
func (a *applier) fire(s *Schedule, fireAt int64, runID, transition string) *FireResult {
	out, cancel := domain.FireOutcome(s.Overlap, a.refreshActive(s), s.BufferedAt != 0)
	s.Fires++
	s.LastFireAt = fireAt
	res := &FireResult{Changed: true, Outcome: out}
	switch out {
	case domain.OutcomeStarted:
		if cancel {
			for _, id := range s.Active {
				if r := a.loadRun(id); r != nil {
					a.cancelRun(r, fmt.Sprintf("cancelled by schedule %s: a newer fire started (overlap cancel_other)", s.ID))
				}
			}
			s.Active = nil
		}
		res.RunID = a.startScheduled(s, runID)
	case domain.OutcomeBuffered:
		s.BufferedAt, s.BufferedRun = fireAt, runID
		res.RunID = runID
	case domain.OutcomeSkipped:
		s.Skipped++
	}
	a.scheduleEvent(s, transition, FireTime(fireAt), string(out), res.RunID)
	return res
}

// refreshActive drops the runs that are done (or gone) from s.Active and
// returns how many are left.
func (a *applier) refreshActive(s *Schedule) int {
	keep := s.Active[:0]
	for _, id := range s.Active {
		if r := a.loadRun(id); r != nil && !r.State.Done() {
			keep = append(keep, id)
		}
	}
	if len(keep) == 0 {
		keep = nil
	}
	s.Active = keep
	return len(keep)
}

// startScheduled starts the schedule's workflow as run id.
func (a *applier) startScheduled(s *Schedule, id string) string {
	if a.loadRun(id) == nil {
		body, err := getJSON[ScheduleBody](a.tx, scheduleBodyKey(s.ID))
		must(err)
		if body == nil {
			panic(fmt.Sprintf("schedule %s has no body", s.ID))
		}
		_, err = a.createRun(id, body.Spec, body.Input, scheduleLabels(s.Labels, s.ID), "", nil, "queue", "")
		must(err)
	}
	s.Started++
	s.LastRunID = id
	s.Active = append(s.Active, id)
	return id
}

func (a *applier) applySchedulePause(c *SchedulePause) any {
	s := a.loadSchedule(c.ID)
	if s == nil {
		return fmt.Errorf("%w: schedule %s; list them with `flowd schedule list`", ErrNotFound, c.ID)
	}
	edge := domain.EdgeScheduleResume
	if c.Paused {
		edge = domain.EdgeSchedulePause
	}
	if !domain.ScheduleMachine.Can(s.State, edge) {
		return &ChangedResult{} // already in that state
	}
	if !c.Paused && c.Next <= 0 {
		return fmt.Errorf("%w: a resumed schedule needs its next fire time", ErrInvalidArgument)
	}
	if len(c.Note) > 1024 {
		return fmt.Errorf("%w: note is over 1024 bytes", ErrInvalidArgument)
	}
	a.stepSchedule(s, edge)
	if !c.Paused {
		s.NextFireAt = c.Next
	}
	if c.Note != "" {
		s.Note = c.Note
	}
	a.saveSchedule(s)
	return &ChangedResult{Changed: true}
}

func (a *applier) applyScheduleDelete(c *ScheduleDelete) any {
	s := a.loadSchedule(c.ID)
	if s == nil {
		return &ChangedResult{}
	}
	a.stepSchedule(s, domain.EdgeScheduleDelete)
	a.del(scheduleKey(s.ID))
	a.del(scheduleBodyKey(s.ID))
	return &ChangedResult{Changed: true}
}

// Schedules lists every schedule, by id.
func (f *FSM) Schedules() ([]Schedule, error) {
	var out []Schedule
	err := f.View(func(r Reader) error {
		var uerr error
		err := r.Scan(pfxSchedule, nil, false, func(_, v []byte) bool {
			var s Schedule
			if uerr = unmarshal(v, &s); uerr != nil {
				return false
			}
			out = append(out, s)
			return true
		})
		if err == nil {
			err = uerr
		}
		return err
	})
	return out, err
}

// GetSchedule returns a schedule and what it starts; ErrNotFound if none.
func (f *FSM) GetSchedule(id string) (*Schedule, *ScheduleBody, error) {
	var s *Schedule
	var b *ScheduleBody
	err := f.View(func(r Reader) (err error) {
		if s, err = getJSON[Schedule](r, scheduleKey(id)); err != nil || s == nil {
			return err
		}
		b, err = getJSON[ScheduleBody](r, scheduleBodyKey(id))
		return err
	})
	if err == nil && s == nil {
		err = fmt.Errorf("%w: schedule %s; list them with `flowd schedule list`", ErrNotFound, id)
	}
	return s, b, err
}

// UnfinishedRuns returns the runs of ids that are not done (and exist), in
// order: a schedule's active list as of now. The stored list is pruned only
// when the schedule next fires (refreshActive), so readers filter it.
func (f *FSM) UnfinishedRuns(ids []string) []string {
	var out []string
	_ = f.View(func(r Reader) error {
		for _, id := range ids {
			if run, err := getJSON[Run](r, runKey(id)); err != nil || run != nil && !run.State.Done() {
				out = append(out, id) // unreadable: kept, as stored
			}
		}
		return nil
	})
	return out
}

// ScheduleRunsDone reports whether every run in ids is done (or gone): a
// buffered fire may then be released.
func (f *FSM) ScheduleRunsDone(ids []string) bool {
	done := true
	_ = f.View(func(r Reader) error {
		for _, id := range ids {
			run, err := getJSON[Run](r, runKey(id))
			if err != nil {
				done = false
				return err
			}
			if run != nil && !run.State.Done() {
				done = false
				return nil
			}
		}
		return nil
	})
	return done
}
