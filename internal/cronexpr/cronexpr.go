// Package cronexpr turns a schedule's timing (a cron expression with a time
// zone, or a fixed interval) into fire times. It wraps robfig/cron's
// standard parser: five fields (minute hour day-of-month month
// day-of-week) and the descriptors @yearly, @monthly, @weekly, @daily,
// @hourly and @every <duration>.
//
// Only the leader and the read path use it: the state machine never parses
// a schedule. The leader computes each next fire time and puts it in the
// command it proposes, so replicas agree even if their time zone databases
// differ (see docs/semantics.md, "Schedules").
package cronexpr

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // the same zones on every machine, even without /usr/share/zoneinfo

	"github.com/robfig/cron/v3"
)

// MinInterval is the shortest interval between two fires.
const MinInterval = time.Second

// Expr is a parsed schedule timing. It is immutable.
type Expr struct {
	sched    cron.Schedule
	interval time.Duration
}

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse parses a cron expression in time zone tz ("" = UTC), or, when expr
// is empty, a fixed interval of intervalMS milliseconds.
func Parse(expr, tz string, intervalMS int64) (*Expr, error) {
	expr = strings.TrimSpace(expr)
	switch {
	case expr != "" && intervalMS != 0:
		return nil, fmt.Errorf("give either a cron expression or an interval, not both")
	case expr == "" && intervalMS == 0:
		return nil, fmt.Errorf("a schedule needs a cron expression (e.g. \"*/5 * * * *\", \"@hourly\", \"@every 1m\") or an interval")
	case expr == "":
		if tz != "" {
			return nil, fmt.Errorf("a time zone applies to a cron expression, not to an interval")
		}
		d := time.Duration(intervalMS) * time.Millisecond
		if d < MinInterval {
			return nil, fmt.Errorf("interval %s is below the minimum of %s", d, MinInterval)
		}
		return &Expr{interval: d}, nil
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, fmt.Errorf("give the time zone with the time zone option, not inside the expression")
	}
	if d, ok := strings.CutPrefix(expr, "@every "); ok {
		iv, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return nil, fmt.Errorf("@every %s: %v (e.g. @every 30s, @every 1h30m)", d, err)
		}
		if iv < MinInterval {
			return nil, fmt.Errorf("@every %s is below the minimum of %s", iv, MinInterval)
		}
		// @every is an interval anchored at the previous fire time.
		return &Expr{interval: iv}, nil
	}
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as \"Europe/Berlin\" or \"UTC\"", tz)
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("cron expression %q: %v (five fields: minute hour day-of-month month day-of-week, or @hourly, @daily, @every 10s ...)", expr, err)
	}
	if v, ok := s.(*cron.SpecSchedule); ok {
		v.Location = loc
	}
	return &Expr{sched: s}, nil
}

// Next returns the first fire time strictly after afterMS (ms since the
// epoch), or 0 if the expression never fires again.
func (e *Expr) Next(afterMS int64) int64 {
	if e.interval > 0 {
		return afterMS + e.interval.Milliseconds()
	}
	t := e.sched.Next(time.UnixMilli(afterMS))
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// First returns the first fire time after a schedule is created (or
// resumed) at nowMS. An interval's first fire is one interval later, on a
// whole second, so fire times read well.
func (e *Expr) First(nowMS int64) int64 {
	if e.interval > 0 {
		return (nowMS/1000)*1000 + e.interval.Milliseconds()
	}
	return e.Next(nowMS)
}

// Upcoming returns up to n fire times from first on (first included).
func (e *Expr) Upcoming(first int64, n int) []int64 {
	var out []int64
	for t := first; t != 0 && len(out) < n; t = e.Next(t) {
		out = append(out, t)
	}
	return out
}

// MaxMissedScan bounds how many missed fire times CatchUp walks; a longer
// outage jumps to the window's start instead of counting every fire.
const MaxMissedScan = 100000

// CatchUp decides a due schedule's next step at nowMS. due is the fire
// time the schedule waits for (due <= nowMS). Fire times older than
// nowMS-windowMS are missed: their number (missed), the first and the last
// of them are returned. fireAt is the first fire time within the window
// (0 if none is due yet) and next the fire time after it (or, with no fire
// due, the next one in the future).
func (e *Expr) CatchUp(due, nowMS, windowMS int64) (fireAt, next int64, missed int, missedFrom, missedTo int64) {
	cutoff := nowMS - windowMS
	t := due
	if iv := e.interval.Milliseconds(); iv > 0 && t < cutoff {
		k := (cutoff - t + iv - 1) / iv
		missed, missedFrom, missedTo = int(k), t, t+(k-1)*iv
		t += k * iv
	}
	for t != 0 && t < cutoff {
		if missed == 0 {
			missedFrom = t
		}
		missedTo = t
		missed++
		if missed >= MaxMissedScan {
			// A lower bound: a longer outage is not counted fire by fire.
			t = e.Next(cutoff - 1)
			break
		}
		t = e.Next(t)
	}
	if t == 0 || t > nowMS {
		return 0, t, missed, missedFrom, missedTo
	}
	return t, e.Next(t), missed, missedFrom, missedTo
}
