package display

import (
	"testing"
	"time"
)

func TestFormats(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		got, want string
	}{
		{Label("succeeded"), "✓ succeeded"},
		{Label("skipped"), "↷ skipped"},
		{Label(""), "-"},
		{Glyph("nope"), "?"},
		{ShortID("01a22ad1-60cd-74fe-a419-b785683f2c7e"), "b785683f2c7e"},
		{ShortID("short"), "short"},
		{Human(850 * time.Millisecond), "850ms"},
		{Human(4 * time.Second), "4s"},
		{Human(4200 * time.Millisecond), "4.2s"},
		{Human(3*time.Minute + 12*time.Second), "3m12s"},
		{Human(2*time.Hour + 5*time.Minute), "2h05m"},
		{Human(76 * time.Hour), "3d04h"},
		{Ago(now, now.Add(-90*time.Second)), "1m30s ago"},
		{Ago(now, now.Add(4*time.Second)), "in 4s"},
		{Ago(now, time.Time{}), "-"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
