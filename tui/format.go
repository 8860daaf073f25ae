package tui

import (
	"github.com/flowd/flowd/internal/display"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// Formatting helpers: ids, times, durations, fitting text into cells.

// Ids, durations and ages are formatted as the CLI does (internal/display).
var (
	shortID = display.ShortID
	human   = display.Human
	ago     = display.Ago
	span    = display.Span
	dash    = display.Dash
)

func itoa(n int) string { return strconv.Itoa(n) }

func utoa(n uint64) string { return strconv.FormatUint(n, 10) }

// clock is a time of day in UTC, "-" for the zero time.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05")
}

// clockMillis is a time of day in UTC with milliseconds, "-" for the
// zero time.
func clockMillis(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000")
}

// stamp is the time of day with its age: "12:03:04 (3m ago)".
func stamp(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return clock(t) + " (" + ago(now, t) + ")"
}

// oneLine squeezes s onto one line of at most n cells.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	return fit(s, n)
}

// width is the display width of a (possibly styled) string. Plain ASCII
// is its length; other strings (glyphs, colours) are measured once and
// cached: table cells repeat ("● running"), and measuring graphemes is the
// most expensive part of drawing a frame.
func width(s string) int {
	plain := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 || s[i] == 0x1b {
			plain = false
			break
		}
	}
	if plain {
		return len(s)
	}
	widths.Lock()
	defer widths.Unlock()
	if w, ok := widths.m[s]; ok {
		return w
	}
	w := ansi.StringWidth(s)
	if len(widths.m) > 20000 {
		clear(widths.m)
	}
	widths.m[s] = w
	return w
}

var widths = struct {
	sync.Mutex
	m map[string]int
}{m: map[string]int{}}

// fit truncates a (possibly styled) string to n cells with an ellipsis.
func fit(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if width(s) <= n {
		return s
	}
	return ansi.Truncate(s, n, "…")
}

// pad fits s into exactly n cells (left aligned).
func pad(s string, n int) string {
	s = fit(s, n)
	if w := width(s); w < n {
		s += spaces(n - w)
	}
	return s
}

// padLeft fits s into exactly n cells, right aligned.
func padLeft(s string, n int) string {
	s = fit(s, n)
	if w := width(s); w < n {
		s = spaces(n-w) + s
	}
	return s
}

const blanks = "                                                                                                                                "

func spaces(n int) string {
	if n <= len(blanks) {
		return blanks[:n]
	}
	return strings.Repeat(" ", n)
}

// labels renders a label map sorted by key: "env=prod team=data".
func labels(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + m[k])
	}
	return b.String()
}

// fill pads or cuts a block to exactly h lines of width w.
func fill(block string, w, h int) string {
	lines := strings.Split(block, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		lines[i] = pad(l, w)
	}
	for len(lines) < h {
		lines = append(lines, strings.Repeat(" ", w))
	}
	return strings.Join(lines, "\n")
}
