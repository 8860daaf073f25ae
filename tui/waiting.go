package tui

import "github.com/flowd/flowd/rpc"

// waitingOnLine is run detail's line for why the run waits (run.get
// waiting_on, computed by the agent when read): the reason and the command
// that lifts it.
func waitingOnLine(w rpc.WaitingOn) string {
	s := "⏸ waiting: " + w.Message
	if w.Command != "" {
		s += " (lift: " + w.Command + ")"
	}
	return s
}
