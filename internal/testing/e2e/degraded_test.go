package e2e

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testing/testutil"
)

// cliResult is one run of the flowd binary.
type cliResult struct {
	code        int
	out, errOut string
	took        time.Duration
}

// flowdCLI runs the flowd binary with args and measures how long it took
// to answer.
func flowdCLI(t testing.TB, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(flowdBin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	t0 := time.Now()
	err := cmd.Run()
	r := cliResult{out: out.String(), errOut: errOut.String(), took: time.Since(t0)}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("flowd %s: %v", strings.Join(args, " "), err)
	}
	first, _, _ := strings.Cut(r.errOut, "\n")
	t.Logf("flowd %s: exit %d in %v: %s", strings.Join(args, " "), r.code, r.took.Round(time.Millisecond), first)
	return r
}

// With no agent at all, every CLI call answers at once and names every
// address it tried.
func TestDegradedNoAgentAnswersAtOnce(t *testing.T) {
	dir := t.TempDir()
	var eps []string
	for _, n := range []string{"n1", "n2", "n3"} {
		eps = append(eps, "unix://"+filepath.Join(dir, n+".sock"))
	}
	addr := strings.Join(eps, ",")
	for _, args := range [][]string{{"run", "list"}, {"submit", filepath.Join(repoRoot(), "examples", "workflows", "demo.yaml")}} {
		r := flowdCLI(t, append([]string{"--addr", addr}, args...)...)
		if r.code != 1 || !strings.Contains(r.errOut, "no agent is listening at any of these 3 addresses") {
			t.Fatalf("%v: exit %d\n%s", args, r.code, r.errOut)
		}
		for _, ep := range eps {
			if !strings.Contains(r.errOut, ep+" (no such socket file)") {
				t.Fatalf("%v: %s not named:\n%s", args, ep, r.errOut)
			}
		}
		if r.took > time.Second {
			t.Fatalf("%v took %v, want < 1s", args, r.took)
		}
	}
}

// A three-agent cluster losing agents one at a time: with 2 of 3 up health
// says degraded (exit 5) and calls work; with 1 of 3 up a write says "no
// quorum" within ~1-2 s, reads answer from the survivor's state with a
// "possibly stale" warning, and submit --wait keeps to --wait-timeout.
func TestDegradedClusterAnswers(t *testing.T) {
	c := startCluster(t, 3)
	addr := strings.Join(c.endpoints(), ",")
	demo := filepath.Join(repoRoot(), "examples", "workflows", "demo.yaml")
	r := flowdCLI(t, "--addr", addr, "submit", "--output", "json", demo)
	if r.code != 0 {
		t.Fatalf("submit: exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	runID := between(r.out, `"short_id": "`, `"`)
	// Every agent must hold the run before agents go (a commit needs only
	// two of three): the stale read below shows it from the survivor.
	// polling other processes' applied index
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, "the agents to converge", func() error {
		var applied []uint64
		for _, a := range c.agents {
			if st := c.status(a); st != nil {
				applied = append(applied, st.AppliedIndex)
			}
		}
		if len(applied) == 3 && applied[0] == applied[1] && applied[1] == applied[2] {
			return nil
		}
		return fmt.Errorf("applied %v", applied)
	})

	leader := c.waitLeader()
	fs := c.followers(leader)
	c.kill9(fs[0])

	// 2 of 3: a quorum holds, health says degraded with its own exit code.
	r = flowdCLI(t, "--addr", addr, "health")
	if r.code != 5 || !strings.Contains(r.out, "degraded: 2 of 3 agents reachable: quorum holds") || !strings.Contains(r.out, fs[0].sock) {
		t.Fatalf("health with 2 of 3: exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	if r = flowdCLI(t, "--addr", addr, "submit", demo); r.code != 0 {
		t.Fatalf("submit with 2 of 3: exit %d\n%s", r.code, r.errOut)
	}

	// 1 of 3: no quorum. If leadership had moved to fs[1], it steps down
	// once it misses the majority; the answers below hold either way.
	c.kill9(leader)
	survivor := fs[1]

	r = flowdCLI(t, "--addr", addr, "submit", demo)
	if r.code != 1 || !strings.Contains(r.errOut, "1 of 3 agents reachable, no quorum: writes stop until a majority is back") ||
		strings.Contains(r.errOut, "flowd dev") {
		t.Fatalf("submit with 1 of 3: exit %d\n%s", r.code, r.errOut)
	}
	if r.took > 2500*time.Millisecond {
		t.Fatalf("submit with 1 of 3 took %v, want ~1-2s", r.took)
	}

	for _, args := range [][]string{{"run", "list"}, {"run", "get", runID}} {
		r = flowdCLI(t, append([]string{"--addr", addr}, args...)...)
		if r.code != 0 || !strings.Contains(r.out, runID) || !strings.Contains(r.errOut, "possibly stale") ||
			!strings.Contains(r.errOut, "1 of 3 agents reachable, no quorum") {
			t.Fatalf("%v with 1 of 3: exit %d\n%s%s", args, r.code, r.out, r.errOut)
		}
		if r.took > 2500*time.Millisecond {
			t.Fatalf("%v with 1 of 3 took %v", args, r.took)
		}
	}

	r = flowdCLI(t, "--addr", addr, "submit", "--wait", "--wait-timeout", "5s", demo)
	if r.code == 0 || r.took > 6*time.Second {
		t.Fatalf("submit --wait --wait-timeout 5s with 1 of 3: exit %d after %v\n%s", r.code, r.took, r.errOut)
	}

	r = flowdCLI(t, "--addr", addr, "health")
	if r.code != 1 || !strings.Contains(r.errOut, "1 of 3 agents reachable, no quorum") {
		t.Fatalf("health with 1 of 3: exit %d\n%s%s", r.code, r.out, r.errOut)
	}

	// Only the survivor in --addr: the client cannot count the others as
	// down, but the survivor has had no leader for longer than elections
	// take, so a write still ends early (well before --timeout).
	r = flowdCLI(t, "--addr", "unix://"+survivor.sock, "submit", demo)
	if r.code != 1 || !strings.Contains(r.errOut, "no quorum") || r.took > 6*time.Second {
		t.Fatalf("submit to the survivor alone: exit %d after %v\n%s", r.code, r.took, r.errOut)
	}
}

// between returns the text of s between the first from and the next to.
func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, to)
	return v
}

// TLS mistakes get a message that names the TLS problem and its fix, at
// once, and never the "start flowd dev" hint of an agent that is not there.
func TestDegradedTLSMismatchMessages(t *testing.T) {
	base := t.TempDir()
	certs := filepath.Join(base, "tls")
	flowdRun(t, "tls", "ca", "create", "--dir", certs)
	flowdRun(t, "tls", "cert", "create", "--ca-dir", certs, "--node", "n1", "--dir", certs, "--ip", "127.0.0.1")
	a := &agent{id: "n1", dir: filepath.Join(base, "n1"), sock: filepath.Join(base, "n1.sock"),
		raft: fmt.Sprintf("127.0.0.1:%d", freePort(t)), fwd: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	clientAddr, httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	a.args = []string{"agent", "--node-id", a.id, "--data-dir", a.dir, "--raft-addr", a.raft, "--forward-addr", a.fwd,
		"--socket", a.sock, "--peers", "n1=" + a.raft, "--client-addr", clientAddr, "--http-addr", httpAddr,
		"--log-level", "info", "--tls-ca", filepath.Join(certs, "ca.pem"), "--tls-cert", filepath.Join(certs, "n1.pem"),
		"--tls-key", filepath.Join(certs, "n1-key.pem")}
	c := &cluster{t: t, agents: []*agent{a}}
	c.start(a)
	t.Cleanup(c.stopAll)
	c.waitLeader()

	ca := filepath.Join(certs, "ca.pem")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no CA given", []string{"--addr", "tls://" + clientAddr, "run", "list"},
			[]string{"TLS problem with tls://" + clientAddr, "signed by an authority this client does not trust", "--ca-cert"}},
		{"plain text to the TLS listener", []string{"--addr", "tcp://" + clientAddr, "--token", "flowd_bogus", "run", "list"},
			[]string{"the agent speaks TLS and this client did not", "use tls://" + clientAddr}},
		{"TLS to a plain listener", []string{"--addr", "tls://" + httpAddr, "--ca-cert", ca, "run", "list"},
			[]string{"TLS problem with tls://" + httpAddr, "does not speak TLS"}},
		{"every endpoint fails TLS", []string{"--addr", "tls://" + clientAddr + ",tls://" + httpAddr, "run", "list"},
			[]string{"signed by an authority this client does not trust", "does not speak TLS"}},
	} {
		r := flowdCLI(t, tc.args...)
		for _, w := range tc.want {
			if r.code != 1 || !strings.Contains(r.errOut, w) {
				t.Fatalf("%s: exit %d, no %q in\n%s", tc.name, r.code, w, r.errOut)
			}
		}
		for _, bad := range []string{"flowd dev", "is a flowd agent listening there"} {
			if strings.Contains(r.errOut, bad) {
				t.Fatalf("%s: %q after a TLS failure:\n%s", tc.name, bad, r.errOut)
			}
		}
		if r.took > 3*time.Second { // two handshakes at most, on a loaded box
			t.Fatalf("%s took %v", tc.name, r.took)
		}
	}
}
