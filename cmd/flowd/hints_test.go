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
		res, err := c.RunSubmit(t.Context(), rpc.SubmitParams{Workflow: spec})
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

// A degraded cluster's errors get hints that point the right way: start
// agents when none listens, reads still work without a quorum, and
// nothing about `flowd dev` after a TLS failure (the message names the
// fix); flowd dev says whether the agents up keep a quorum.
func TestDegradedHintsPointTheRightWay(t *testing.T) {
	tlsErr := &rpc.ConnError{Endpoint: "tls://h:1", Err: &rpc.TLSError{Endpoint: "tls://h:1", Problem: "p"}, NotSent: true}
	for _, c := range []struct {
		name      string
		err       error
		want, not string
	}{
		{"no agent", &rpc.ReachError{Kind: rpc.ErrNoAgent}, "flowd dev", ""},
		{"no quorum", &rpc.ReachError{Kind: rpc.ErrNoQuorum}, "reads still answer", "flowd dev"},
		{"TLS, all endpoints", &rpc.ReachError{Kind: rpc.ErrTLS}, "", "flowd dev"},
		{"TLS, one endpoint", tlsErr, "", "flowd dev"},
	} {
		h := hintFor(c.err)
		if (c.want == "" && h != "") || !strings.Contains(h, c.want) || (c.not != "" && strings.Contains(h, c.not)) {
			t.Errorf("%s: hint %q", c.name, h)
		}
	}
	if strings.Contains(tlsErr.Error(), "listening there") {
		t.Errorf("a TLS failure asks whether an agent listens: %v", tlsErr)
	}
	for _, c := range []struct {
		up, n int
		want  string
	}{
		{3, 3, "3 of 3 agents up: quorum holds"},
		{2, 3, "2 of 3 agents up: quorum holds (one more down stops writes)"},
		{1, 3, "1 of 3 agents up: no quorum, writes stop"},
		{3, 5, "3 of 5 agents up: quorum holds (one more"},
		{2, 5, "2 of 5 agents up: no quorum"},
	} {
		if got := quorumLine(c.up, c.n); !strings.HasPrefix(got, c.want) {
			t.Errorf("quorumLine(%d, %d) = %q, want %q...", c.up, c.n, got, c.want)
		}
	}
}
