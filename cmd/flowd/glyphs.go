package main

import (
	"github.com/flowd/flowd/internal/display"
	"io"
	"os"

	"github.com/urfave/cli/v2"
)

// State display: glyph + word from internal/display (shared with the TUI),
// plus the CLI's own ANSI colouring.

// StateGlyph returns the glyph of state ("?" if unknown).
var StateGlyph = display.Glyph

// StateLabel is the glyph and the word: "✓ succeeded".
var StateLabel = display.Label

// stateColor is the ANSI colour of a state. Every code is two digits so
// coloured cells of one column all carry the same number of invisible bytes
// and text/tabwriter still aligns the columns after them.
func stateColor(state string) string {
	switch state {
	case "succeeded":
		return "32"
	case "failed":
		return "31"
	case "running", "ready":
		return "36"
	case "retrying", "interrupted":
		return "33"
	case "reverting", "reverted":
		return "35"
	case "pending", "cancelled", "skipped":
		return "90"
	}
	return "39"
}

// painter colours state labels when the output is a terminal and colour is
// not disabled (--no-color, FLOWD_NO_COLOR, NO_COLOR).
type painter struct{ on bool }

func newPainter(cCtx *cli.Context, w io.Writer) painter {
	if rootCtx(cCtx).Bool("no-color") || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return painter{}
	}
	return painter{on: isTerminal(w)}
}

// state is StateLabel, coloured.
func (p painter) state(state string) string {
	l := StateLabel(state)
	if !p.on {
		return l
	}
	return "\x1b[" + stateColor(state) + "m" + l + "\x1b[0m"
}

// header pads a table header cell that sits above coloured cells with an
// invisible sequence of the same byte length, keeping tabwriter aligned.
func (p painter) header(s string) string {
	if !p.on {
		return s
	}
	return "\x1b[39m" + s + "\x1b[0m"
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
