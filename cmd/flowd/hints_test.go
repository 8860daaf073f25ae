package main

import (
	"encoding/json"
	"fmt"
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

// Against a cluster: an unknown peer id is not_found (-32001) and the hint
// does not send the user to the run list; an ambiguous id part says how
// many runs it matches, all of them (the count stopped at 11).
func TestHintsAgainstACluster(t *testing.T) {
	tc := startCluster(t)
	for _, args := range [][]string{
		{"operator", "raft", "remove-peer", "n9"},
		{"operator", "raft", "transfer-leadership", "n9"},
	} {
		r := tc.must(t, exitError, args...)
		if !strings.Contains(r.err, `no member "n9"`) || !strings.Contains(r.err, "flowd operator raft list-peers") ||
			strings.Contains(r.err, "run list") {
			t.Errorf("%v:\n%s", args, r)
		}
		r = tc.must(t, exitError, append(args, "-o", "json")...)
		if !strings.Contains(r.out+r.err, "-32001") {
			t.Errorf("%v: not -32001 not_found:\n%s", args, r)
		}
	}

	c := tc.client(t)
	spec := json.RawMessage(`{"name":"many","tasks":[{"key":"a","type":"nobody"}]}`)
	const n = 14
	var ids []string
	for range n {
		res, err := c.Submit(t.Context(), rpc.SubmitParams{Workflow: spec})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	tc.sync(t)
	// The runs share the UUIDv7's leading timestamp digits: "0" is in
	// every id.
	r := tc.must(t, exitError, "run", "get", ids[0][:1])
	if want := fmt.Sprintf("matches %d runs", n); !strings.Contains(r.err, want) {
		t.Fatalf("want %q:\n%s", want, r)
	}
}
