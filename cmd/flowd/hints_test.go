package main

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/rpc"
)

// A not-found answer gets a hint that points the right way: none when the
// agent already named the command to run (an unknown peer id), the run's
// tasks for a task id, the run list otherwise.
func TestNotFoundHintsPointTheRightWay(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		{"not found: no member \"n9\"; run `flowd operator raft list-peers`", ""},
		{"not found: task r/x", "flowd run get RUN"},
		{"not found: run 0123", "flowd run list"},
	} {
		h := hintFor(&rpc.Error{Code: rpc.CodeNotFound, Message: c.msg})
		if (c.want == "" && h != "") || (c.want != "" && !strings.Contains(h, c.want)) {
			t.Errorf("%q: hint %q, want %q", c.msg, h, c.want)
		}
	}
}
