package main

import (
	"io"
	"os"

	"github.com/urfave/cli/v2"
)

// State glyphs, shared by the CLI and (later) the TUI: every run and task
// state is shown as a glyph followed by its word, so state stays readable
// without colour (NO_COLOR) and in logs. The helpers depend on nothing but
// the standard library so they can move to a shared package unchanged.

// StateGlyphs maps a run or task state to its one-rune glyph.
var StateGlyphs = map[string]string{
	"pending":     "○",
	"ready":       "◌",
	"running":     "●",
	"retrying":    "…",
	"succeeded":   "✓",
	"failed":      "✗",
	"cancelled":   "⊘",
	"interrupted": "‖",
	"reverting":   "↺",
	"reverted":    "⟲",
}

// StateGlyph returns the glyph of state ("?" if unknown).
func StateGlyph(state string) string {
	if g, ok := StateGlyphs[state]; ok {
		return g
	}
	return "?"
}

// StateLabel is the glyph and the word: "✓ succeeded".
func StateLabel(state string) string {
	if state == "" {
		return "-"
	}
	return StateGlyph(state) + " " + state
}

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
	case "pending", "cancelled":
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
