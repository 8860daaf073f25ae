// Package display holds the presentation rules the CLI and the TUI share:
// state glyphs, short run ids and compact durations. Every state is shown
// as a glyph followed by its word, so state stays readable without colour
// (NO_COLOR) and in logs. Standard library only.
package display

import (
	"fmt"
	"time"
)

// Glyphs maps a run or task state to its one-rune glyph.
var Glyphs = map[string]string{
	"pending":     "○",
	"ready":       "◌",
	"running":     "●",
	"retrying":    "…",
	"succeeded":   "✓",
	"failed":      "✗",
	"skipped":     "↷",
	"cancelled":   "⊘",
	"interrupted": "‖",
	"reverting":   "↺",
	"reverted":    "⟲",
}

// Glyph returns the glyph of state ("?" if unknown).
func Glyph(state string) string {
	if g, ok := Glyphs[state]; ok {
		return g
	}
	return "?"
}

// Label is the glyph and the word: "✓ succeeded" ("-" for no state).
func Label(state string) string {
	if state == "" {
		return "-"
	}
	return Glyph(state) + " " + state
}

// ShortIDLen is the length of a short run id: the last 12 hex digits of a
// UUIDv7, its random tail (the leading digits are a timestamp, shared by
// every run created in the same minute).
const ShortIDLen = 12

// ShortID returns the short form of a run id.
func ShortID(id string) string {
	if len(id) <= ShortIDLen {
		return id
	}
	return id[len(id)-ShortIDLen:]
}

// Human formats a duration compactly: 850ms, 4s, 4.2s, 3m12s, 2h05m, 3d04h.
func Human(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute && d%time.Second == 0:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// Ago is a relative age at now ("3m12s ago", "in 4s"), "-" for the zero time.
func Ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + Human(d)
	}
	return Human(d) + " ago"
}

// Span is the duration from from to to ("-" if from is zero); an
// unfinished span (to zero) runs to now.
func Span(now, from, to time.Time) string {
	if from.IsZero() {
		return "-"
	}
	if to.IsZero() {
		to = now
	}
	return Human(to.Sub(from))
}

// Dash shows an empty value as "-".
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
