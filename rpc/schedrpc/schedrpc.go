// Package schedrpc is the client protocol of schedules (docs/rpc.md,
// "Schedules"): the params and results of the schedule.* methods and typed
// calls over an rpc.Client. The method names and their routes and roles
// are in package rpc with the others.
package schedrpc

import (
	"context"
	"encoding/json"
	"time"

	"github.com/flowd/flowd/rpc"
)

// CreateParams of schedule.create. Exactly one of Cron and IntervalMS.
type CreateParams struct {
	ID string `json:"id"`
	// Cron: five fields (minute hour day-of-month month day-of-week) or
	// @yearly/@monthly/@weekly/@daily/@hourly/@every <duration>, in TimeZone
	// (an IANA name; default UTC).
	Cron       string `json:"cron,omitempty"`
	TimeZone   string `json:"time_zone,omitempty"`
	IntervalMS int64  `json:"interval_ms,omitempty"`
	// Workflow is the spec each fire starts (frozen at create), with Input
	// and Labels for every run.
	Workflow json.RawMessage   `json:"workflow"`
	Input    json.RawMessage   `json:"input,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	// Overlap: skip (default), buffer_one, allow or cancel_other.
	Overlap string `json:"overlap,omitempty"`
	// CatchupWindowMS: how late a fire may still run after downtime
	// (default 60000); older fires are missed and counted.
	CatchupWindowMS int64  `json:"catchup_window_ms,omitempty"`
	Paused          bool   `json:"paused,omitempty"`
	Note            string `json:"note,omitempty"`
}

// CreateResult of schedule.create; Created false: the id exists (nothing changed).
type CreateResult struct {
	ID         string    `json:"id"`
	State      string    `json:"state"`
	Created    bool      `json:"created"`
	NextFireAt time.Time `json:"next_fire_at,omitzero"`
	Index      uint64    `json:"index,omitempty"`
}

// IDParams names a schedule; Next (schedule.get) is how many next fire
// times to list (default 5, at most 100).
type IDParams struct {
	ID   string `json:"id"`
	Next int    `json:"next,omitempty"`
}

// PauseParams of schedule.pause and schedule.resume.
type PauseParams struct {
	ID   string `json:"id"`
	Note string `json:"note,omitempty"`
}

// TriggerParams of schedule.trigger: fire now. RunID (optional, a UUID)
// makes a retried trigger start one run.
type TriggerParams struct {
	ID    string `json:"id"`
	RunID string `json:"run_id,omitempty"`
}

// FireResult of schedule.trigger. Outcome: started, skipped or buffered
// (the overlap policy); Changed false: this run id was triggered before.
type FireResult struct {
	Changed bool   `json:"changed"`
	Outcome string `json:"outcome,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	Index   uint64 `json:"index,omitempty"`
}

// Schedule is one schedule.
type Schedule struct {
	ID              string            `json:"id"`
	State           string            `json:"state"` // active | paused
	Cron            string            `json:"cron,omitempty"`
	TimeZone        string            `json:"time_zone,omitempty"`
	IntervalMS      int64             `json:"interval_ms,omitempty"`
	Workflow        string            `json:"workflow"`
	Labels          map[string]string `json:"labels,omitempty"`
	Overlap         string            `json:"overlap"`
	CatchupWindowMS int64             `json:"catchup_window_ms"`
	Note            string            `json:"note,omitempty"`
	NextFireAt      time.Time         `json:"next_fire_at,omitzero"`
	// NextFires: the next fire times (schedule.get only; none while paused).
	NextFires  []time.Time `json:"next_fires,omitempty"`
	LastFireAt time.Time   `json:"last_fire_at,omitzero"`
	LastRunID  string      `json:"last_run_id,omitempty"`
	// ActiveRuns: runs it started that were not done at its last fire.
	ActiveRuns []string  `json:"active_runs,omitempty"`
	BufferedAt time.Time `json:"buffered_at,omitzero"`
	// Fires (scheduled and triggered), runs Started, fires Skipped by the
	// overlap policy, fires Missed (older than the catch-up window).
	Fires     uint64    `json:"fires"`
	Started   uint64    `json:"started"`
	Skipped   uint64    `json:"skipped"`
	Missed    uint64    `json:"missed"`
	CreatedAt time.Time `json:"created_at"`
	// Spec and Input: what each fire starts (schedule.get only).
	Spec  json.RawMessage `json:"spec,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

// ListResult of schedule.list, by id.
type ListResult struct {
	Schedules []Schedule `json:"schedules"`
}

// ChangedResult of pause, resume and delete.
type ChangedResult = rpc.ChangedResult

// Create calls schedule.create (idempotent by id).
func Create(ctx context.Context, c *rpc.Client, p CreateParams) (*CreateResult, error) {
	var out CreateResult
	return &out, c.CallIdempotent(ctx, rpc.MethodScheduleCreate, p, &out)
}

// Get calls schedule.get.
func Get(ctx context.Context, c *rpc.Client, id string, next int) (*Schedule, error) {
	var out Schedule
	return &out, c.CallIdempotent(ctx, rpc.MethodScheduleGet, IDParams{ID: id, Next: next}, &out)
}

// List calls schedule.list.
func List(ctx context.Context, c *rpc.Client) (*ListResult, error) {
	var out ListResult
	return &out, c.CallIdempotent(ctx, rpc.MethodScheduleList, struct{}{}, &out)
}

// Pause calls schedule.pause (pause) or schedule.resume.
func Pause(ctx context.Context, c *rpc.Client, id, note string, pause bool) (*ChangedResult, error) {
	m := rpc.MethodScheduleResume
	if pause {
		m = rpc.MethodSchedulePause
	}
	var out ChangedResult
	return &out, c.CallIdempotent(ctx, m, PauseParams{ID: id, Note: note}, &out)
}

// Trigger calls schedule.trigger; with p.RunID set (the CLI always sets
// one) it is retried safely.
func Trigger(ctx context.Context, c *rpc.Client, p TriggerParams) (*FireResult, error) {
	var out FireResult
	do := c.Call
	if p.RunID != "" {
		do = c.CallIdempotent
	}
	return &out, do(ctx, rpc.MethodScheduleTrigger, p, &out)
}

// Delete calls schedule.delete.
func Delete(ctx context.Context, c *rpc.Client, id string) (*ChangedResult, error) {
	var out ChangedResult
	return &out, c.CallIdempotent(ctx, rpc.MethodScheduleDelete, IDParams{ID: id}, &out)
}

// WriteIndex is the raft index of the write (a follower that forwarded it
// waits for it before its next read).
func (r CreateResult) WriteIndex() uint64 { return r.Index }

// WriteIndex is the raft index of the write.
func (r FireResult) WriteIndex() uint64 { return r.Index }
