package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A port flowd dev needs that is taken is reported before any agent starts,
// with the flowd dev flag that moves it (an agent would say --forward-addr,
// which flowd dev does not take).
func TestDevPortClashSuggestsBasePort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--base-port", fmt.Sprint(port), "--http-base-port", "0"}, "--base-port"}, // n1's raft port: port-1 could be taken by anything else
		{[]string{"--base-port", fmt.Sprint(freePort(t)), "--nodes", "1", "--http-base-port", fmt.Sprint(port)}, "--http-base-port"},
	} {
		var out, errb bytes.Buffer
		dir := t.TempDir()
		code := run(t.Context(), append([]string{"flowd", "dev", "--dir", dir, "--concurrency", "0"}, c.args...), nil, &out, &errb)
		if code != exitError {
			t.Fatalf("dev %v: exit %d, want %d\n%s%s", c.args, code, exitError, out.String(), errb.String())
		}
		msg := errb.String()
		if !strings.Contains(msg, fmt.Sprintf("port %d", port)) || !strings.Contains(msg, "hint:") || !strings.Contains(msg, c.flag+" N") && !strings.Contains(msg, c.flag) {
			t.Fatalf("dev %v: no port and %s in\n%s", c.args, c.flag, msg)
		}
		if strings.Contains(msg, "--forward-addr") {
			t.Fatalf("dev %v: hint names an agent flag:\n%s", c.args, msg)
		}
	}
}

// health says what to do for what it sees: a node that is up but has no
// leader while the others follow one (a node not added yet) gets add-peer,
// not "start the missing agents".
func TestHealthDiagnosis(t *testing.T) {
	up := func(node, leader string) nodeHealth { return nodeHealth{Reachable: true, Node: node, Leader: leader} }
	down := nodeHealth{Endpoint: "unix:///x.sock"}
	for _, c := range []struct {
		name            string
		nodes           []nodeHealth
		leader, problem string
		hint, notInHint string
	}{
		{"healthy", []nodeHealth{up("n1", "n1"), up("n2", "n1"), up("n3", "n1")}, "n1", "", "", ""},
		{"node not yet added", []nodeHealth{up("n1", "n1"), up("n2", "n1"), up("n3", "n1"), up("n4", "")}, "",
			"n4 has no leader while the others follow n1", "flowd operator raft add-peer n4", "start the missing"},
		{"only the new node probed", []nodeHealth{up("n4", "")}, "", "no leader", "add-peer n4", ""},
		{"quorum lost", []nodeHealth{up("n1", ""), down, down}, "", "1 of 3 agents reachable, no quorum", "operator raft recover", "add-peer"},
		{"quorum lost, the survivor names a dead leader", []nodeHealth{up("n2", "n3"), down, down}, "", "1 of 3 agents reachable, no quorum: they still name n3", "operator raft recover", "add-peer"},
		{"a reachable leader with the others down", []nodeHealth{up("n1", "n1"), down, down}, "n1", "", "", ""},
		{"quorum lost, more endpoints up", []nodeHealth{up("n1", ""), up("n2", ""), down}, "", "may have lost its quorum", "start the missing agents", "add-peer"},
		{"nothing reachable", []nodeHealth{down}, "", "no agent is reachable", "start the missing agents", ""},
		{"split views", []nodeHealth{up("n1", "n1"), up("n2", "n2")}, "", "disagree", "retry", "start the missing"},
	} {
		leader, problem, hint := diagnose(c.nodes)
		if leader != c.leader || !strings.Contains(problem, c.problem) || (c.problem == "") != (problem == "") ||
			!strings.Contains(hint, c.hint) || (c.notInHint != "" && strings.Contains(hint, c.notInHint)) {
			t.Errorf("%s: leader %q problem %q hint %q; want leader %q, problem ~%q, hint ~%q without %q",
				c.name, leader, problem, hint, c.leader, c.problem, c.hint, c.notInHint)
		}
	}
}

// examples/scripts/submit.sh says what it needs on a machine without socat
// and jq instead of failing on the first missing command.
func TestSubmitScriptNamesWhatItNeeds(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	bin := t.TempDir()
	if err := os.Symlink(bash, filepath.Join(bin, "bash")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join("..", "..", "examples", "scripts", "submit.sh"), "/nonexistent.sock", "wf.json")
	cmd.Env = []string{"PATH=" + bin}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("want exit 1, got %v\n%s", err, out)
	}
	for _, want := range []string{"needs socat jq", "apt-get install socat jq", "submit.py"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("no %q in\n%s", want, out)
		}
	}
}
