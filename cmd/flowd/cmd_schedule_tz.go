package main

import "time"

// fireTime is a fire time in the schedule's time zone (--tz), where its
// cron expression reads, with the UTC time beside it; UTC alone for a
// schedule without one.
func fireTime(t time.Time, tz string) string {
	utc := t.UTC().Format("2006-01-02T15:04:05Z")
	if tz == "" || tz == "UTC" {
		return utc
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return utc
	}
	return t.In(loc).Format("2006-01-02 15:04:05 MST") + " " + tz + " (" + utc + ")"
}
