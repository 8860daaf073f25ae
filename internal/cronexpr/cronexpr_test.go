package cronexpr

import (
	"testing"
	"time"
)

func ms(s string) int64 {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UnixMilli()
}

func TestParseAndNext(t *testing.T) {
	cases := []struct {
		expr, tz string
		iv       int64
		after    string
		want     []string
	}{
		{"*/15 * * * *", "", 0, "2026-01-01T10:07:00Z", []string{"2026-01-01T10:15:00Z", "2026-01-01T10:30:00Z"}},
		{"@hourly", "", 0, "2026-01-01T10:07:00Z", []string{"2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"}},
		// 02:00 in Berlin is 01:00 UTC in winter.
		{"0 2 * * *", "Europe/Berlin", 0, "2026-01-01T00:00:00Z", []string{"2026-01-01T01:00:00Z", "2026-01-02T01:00:00Z"}},
		{"@every 1s", "", 0, "2026-01-01T00:00:00Z", []string{"2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"}},
		{"", "", 90000, "2026-01-01T00:00:00Z", []string{"2026-01-01T00:01:30Z", "2026-01-01T00:03:00Z"}},
	}
	for _, c := range cases {
		e, err := Parse(c.expr, c.tz, c.iv)
		if err != nil {
			t.Fatalf("%q: %v", c.expr, err)
		}
		got := e.Upcoming(e.Next(ms(c.after)), len(c.want))
		for i, w := range c.want {
			if got[i] != ms(w) {
				t.Errorf("%q fire %d = %s, want %s", c.expr, i, time.UnixMilli(got[i]).UTC(), w)
			}
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, c := range []struct {
		expr, tz string
		iv       int64
	}{
		{"", "", 0}, {"* * *", "", 0}, {"@every 10ms", "", 0}, {"", "", 10}, {"* * * * *", "Mars/Base", 0},
		{"* * * * *", "", 1000}, {"", "UTC", 1000}, {"CRON_TZ=UTC * * * * *", "", 0},
	} {
		if _, err := Parse(c.expr, c.tz, c.iv); err == nil {
			t.Errorf("Parse(%q, %q, %d) accepted", c.expr, c.tz, c.iv)
		}
	}
}

func TestNeverFires(t *testing.T) {
	e, err := Parse("0 0 30 2 *", "", 0) // February 30th
	if err != nil {
		t.Fatal(err)
	}
	if n := e.Next(ms("2026-01-01T00:00:00Z")); n != 0 {
		t.Fatalf("Next = %d, want 0", n)
	}
}

func TestCatchUp(t *testing.T) {
	e, _ := Parse("", "", 1000)
	base := ms("2026-01-01T00:00:00Z")
	// Due at base, now base+10.5s, window 3s: fires base..base+7s are missed,
	// base+8s is the first within the window.
	fire, next, missed, from, to := e.CatchUp(base, base+10500, 3000)
	if fire != base+8000 || next != base+9000 || missed != 8 || from != base || to != base+7000 {
		t.Fatalf("interval: fire %d next %d missed %d from %d to %d", fire-base, next-base, missed, from-base, to-base)
	}
	c, _ := Parse("* * * * *", "", 0)
	fire, next, missed, _, _ = c.CatchUp(base, base+10*60000+500, 3*60000)
	if fire != base+8*60000 || next != base+9*60000 || missed != 8 {
		t.Fatalf("cron: fire %d next %d missed %d", fire-base, next-base, missed)
	}
	// Nothing missed, on time.
	fire, next, missed, _, _ = e.CatchUp(base, base+5, 60000)
	if fire != base || next != base+1000 || missed != 0 {
		t.Fatalf("on time: fire %d next %d missed %d", fire-base, next-base, missed)
	}
	// Window 0 and late: the due fire is missed, the next is in the future.
	fire, next, missed, _, _ = e.CatchUp(base, base+500, 0)
	if fire != 0 || next != base+1000 || missed != 1 {
		t.Fatalf("window 0: fire %d next %d missed %d", fire, next-base, missed)
	}
}
