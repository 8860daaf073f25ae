package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// Security acceptance of issue 11 with a real attacker: a three-agent
// mutual-TLS cluster of flowd processes, and every attack made by a
// separate process (internal/testing/attacker), as uid 65534 wherever a local user
// could make it. The agents run as root, as they do in CI.

// attackerBin builds internal/testing/attacker into a directory every user may
// enter (it runs as uid 65534).
func attackerBin(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "flowd-attacker-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "attacker")
	cmd := exec.Command("go", "build", "-o", bin, "./internal/testing/attacker")
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the attacker: %v\n%s", err, out)
	}
	return bin
}

// attackReport is one line of the attacker's output (internal/testing/attacker).
type attackReport struct {
	Step    string          `json:"step"`
	Err     string          `json:"error"`
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Result  json.RawMessage `json:"result"`
	N       int             `json:"n"`
}

// answered: the agent answered the request with a result (not an error,
// not a refused connection).
func (r attackReport) answered() bool { return r.Err == "" && r.Code == 0 && len(r.Result) > 0 }

// attacker runs one attack (as uid 65534 if nobody) and returns its reports.
type attacker struct {
	t   *testing.T
	bin string
}

func (a attacker) command(nobody bool, args ...string) *exec.Cmd {
	if !nobody {
		return exec.Command(a.bin, args...)
	}
	cmd := exec.Command("setpriv", append([]string{"--reuid", "65534", "--regid", "65534", "--clear-groups", a.bin}, args...)...)
	cmd.Env = append(os.Environ(), "HOME=/", "TMPDIR=/tmp")
	return cmd
}

func (a attacker) run(nobody bool, args ...string) []attackReport {
	a.t.Helper()
	cmd := a.command(nobody, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		a.t.Fatalf("attacker %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return parseReports(a.t, string(out))
}

func parseReports(t *testing.T, out string) []attackReport {
	t.Helper()
	var rs []attackReport
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r attackReport
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("attacker output %q: %v", l, err)
		}
		rs = append(rs, r)
	}
	return rs
}

// wantCodes checks that the attacker's calls got exactly these codes, in
// order (0: answered with a result).
func wantCodes(t *testing.T, what string, rs []attackReport, codes ...int) {
	t.Helper()
	if len(rs) != len(codes) {
		t.Fatalf("%s: %d answers, want %d: %+v", what, len(rs), len(codes), rs)
	}
	for i, r := range rs {
		if r.Err != "" {
			t.Fatalf("%s: %s: %s", what, r.Step, r.Err)
		}
		if r.Code != codes[i] || (codes[i] == 0 && !r.answered()) {
			t.Fatalf("%s: %s answered code %d (%s), want %d", what, r.Step, r.Code, r.Message, codes[i])
		}
	}
}

// startAttackCluster starts three mutual-TLS agents with TCP client
// listeners whose sockets any local user can reach (0666 in 0755
// directories), so that only the agents' own checks stand between uid
// 65534 and the API: n1 gives uid 65534 the worker role, n2 gives gid
// 65534 the read role, n3 gives it nothing. The digest loop is off so that
// the test's own digests compare exactly the same applied index before and
// after the attacks.
func startAttackCluster(t *testing.T) (c *cluster, certs string, clientAddr map[string]string) {
	t.Helper()
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	certs = filepath.Join(base, "tls")
	flowdRun(t, "tls", "ca", "create", "--dir", certs)
	flowdRun(t, "tls", "cert", "create", "--ca-dir", certs, "--node", "n9", "--dir", certs)
	c = &cluster{t: t}
	clientAddr = map[string]string{}
	var peers []string
	for i := 1; i <= 3; i++ {
		a := &agent{id: fmt.Sprintf("n%d", i), dir: filepath.Join(base, fmt.Sprintf("n%d", i)),
			sock: filepath.Join(base, fmt.Sprintf("n%d.sock", i)),
			raft: fmt.Sprintf("127.0.0.1:%d", freePort(t)), fwd: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
		clientAddr[a.id] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		peers = append(peers, a.id+"="+a.raft)
		c.agents = append(c.agents, a)
	}
	roles := map[string][]string{"n1": {"--allow-worker-uids", "65534"}, "n2": {"--allow-read-gids", "65534"}}
	t.Setenv("FLOWD_DIGEST_INTERVAL", "off")
	for _, a := range c.agents {
		flowdRun(t, "tls", "cert", "create", "--ca-dir", certs, "--node", a.id, "--dir", certs, "--ip", "127.0.0.1")
		a.args = append([]string{"agent", "--node-id", a.id, "--data-dir", a.dir, "--raft-addr", a.raft, "--forward-addr", a.fwd,
			"--socket", a.sock, "--peers", strings.Join(peers, ","), "--client-addr", clientAddr[a.id],
			// Timeouts of 1 s: the partial-line attack loads a 2-core
			// machine, and a spurious election would hide a forged one.
			"--raft-heartbeat-timeout", "1s", "--raft-election-timeout", "1s", "--log-level", "info",
			"--tls-ca", filepath.Join(certs, "ca.pem"), "--tls-cert", filepath.Join(certs, a.id+".pem"),
			"--tls-key", filepath.Join(certs, a.id+"-key.pem")}, roles[a.id]...)
		c.start(a)
	}
	t.Cleanup(c.stopAll)
	c.waitLeader()
	for _, a := range c.agents {
		if err := os.Chmod(a.sock, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	// The attacker (uid 65534) presents n9's certificate, a CA-signed one
	// for a node outside the configuration: it may read that pair.
	for _, f := range []string{"n9.pem", "n9-key.pem"} {
		if err := os.Chown(filepath.Join(certs, f), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(certs, 0o755); err != nil {
		t.Fatal(err)
	}
	return c, certs, clientAddr
}

// lineBuf is the agent's read buffer per connection (rpc's lineBufSize).
const lineBuf = 64 << 10

// clearPeak resets the agent's peak RSS (VmHWM) to its current RSS, so
// that the peak measured next is the attack's. A kernel without
// clear_refs keeps the peak since the agent started (a few MB over its
// RSS at rest), which the bounds below tolerate.
func clearPeak(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0); err != nil {
		t.Logf("the peak RSS of %d cannot be reset (%v): it counts from the agent's start", pid, err)
	}
}

// stateOf is what the attacks must not change: every replica's digest at
// the same applied index, the runs, the settings and the tokens.
type stateOf struct {
	digests            map[string]rpc.DigestResult
	runs, settings, tk string
}

func snapshotState(t *testing.T, c *cluster) stateOf {
	t.Helper()
	var ds map[string]rpc.DigestResult
	// readiness polling of external processes
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, "the replicas to settle", func() error {
		ds = digests(t, c)
		if ds["n1"].AppliedIndex == ds["n2"].AppliedIndex && ds["n2"].AppliedIndex == ds["n3"].AppliedIndex {
			return nil
		}
		return fmt.Errorf("%+v", ds)
	})
	if ds["n1"].Digest != ds["n2"].Digest || ds["n2"].Digest != ds["n3"].Digest {
		t.Fatalf("replicas differ at index %d: %+v", ds["n1"].AppliedIndex, ds)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := c.client()
	s := stateOf{digests: ds}
	var runs rpc.ListResult
	var settings, tokens json.RawMessage
	for m, out := range map[string]any{rpc.MethodRunList: &runs, rpc.MethodSettingsGet: &settings, rpc.MethodACLTokenList: &tokens} {
		if err := cl.CallIdempotent(ctx, m, struct{}{}, out); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
	}
	var ids []string
	for _, r := range runs.Runs {
		ids = append(ids, r.ID+"="+string(r.State))
	}
	s.runs, s.settings, s.tk = strings.Join(ids, ","), string(settings), string(tokens)
	return s
}

func TestSecurityAttackerProcesses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the attacker runs as uid 65534 (setpriv), the agents as root (CI runs as root)")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv is missing (util-linux): install it to run the attacker as uid 65534")
	}
	start := time.Now()
	atk := attacker{t: t, bin: attackerBin(t)}
	c, certs, clientAddr := startAttackCluster(t)
	leader := c.waitLeader()
	follower := c.followers(leader)[0]
	byID := map[string]*agent{}
	for _, a := range c.agents {
		byID[a.id] = a
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	// Something to protect: a run, and a worker token for the TCP attack.
	if _, err := c.client().RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"name":"precious","tasks":[{"key":"a","type":"echo"}]}`)}); err != nil {
		t.Fatal(err)
	}
	var tok rpc.ACLTokenCreateResult
	out, err := exec.Command(flowdBin, "--addr", "unix://"+leader.sock, "-o", "json", "acl", "token", "create", "--role", "worker", "--name", "attack-worker").Output()
	if err != nil || json.Unmarshal(out, &tok) != nil || tok.Secret == "" {
		t.Fatalf("worker token: %v\n%s", err, out)
	}
	before := snapshotState(t, c)
	forged := map[string]bool{}

	// (a) The raft port: a self-signed certificate claiming to be the
	// leader, and a CA-signed certificate of a non-member (n9), send an
	// AppendEntries at term+1 carrying a real Submit, and TimeoutNow.
	st := c.status(follower)
	for i, certArgs := range [][]string{nil, {"--cert-file", filepath.Join(certs, "n9.pem"), "--key-file", filepath.Join(certs, "n9-key.pem")}} {
		id := fmt.Sprintf("0190a0a0-0000-7000-8000-0000000000a%d", i)
		forged[id] = true
		rs := atk.run(true, append([]string{"raft", "--target", follower.raft, "--target-id", follower.id,
			"--leader-id", leader.id, "--leader-addr", leader.raft, "--term", fmt.Sprint(st.Term),
			"--index", fmt.Sprint(st.CommitIndex), "--run-id", id}, certArgs...)...)
		for _, r := range rs {
			if r.Err == "" {
				t.Fatalf("raft port, certificate %v: %s answered %s", certArgs, r.Step, r.Result)
			}
			t.Logf("raft port, %s (%v): refused: %s", r.Step, certArgs != nil, r.Err)
		}
	}
	for _, a := range c.agents {
		if got := c.status(a); got == nil || got.Term != st.Term {
			t.Fatalf("%s: term %v after the raft attacks, want %d", a.id, got, st.Term)
		}
	}
	if b, _ := os.ReadFile(follower.dir + ".log"); !strings.Contains(string(b), "raft connection refused") {
		t.Fatalf("%s did not log the refused raft connections:\n%s", follower.id, tail(string(b), 20))
	}

	// (b) The forwarding port: plaintext, no certificate, a self-signed
	// member certificate, a member certificate from another CA, a CA-signed
	// non-member: each submits a run, and none gets an answer.
	for i, mode := range []string{"plaintext", "nocert", "selfsigned", "otherca", "files"} {
		id := fmt.Sprintf("0190a0a0-0000-7000-8000-0000000000b%d", i)
		forged[id] = true
		args := []string{"forward", "--target", leader.fwd, "--mode", mode, "--as", follower.id, "--run-id", id}
		if mode == "files" {
			args = append(args, "--cert-file", filepath.Join(certs, "n9.pem"), "--key-file", filepath.Join(certs, "n9-key.pem"))
		}
		for _, r := range atk.run(true, args...) {
			if r.Err == "" {
				t.Fatalf("forward port, %s: %s answered code %d %s", mode, r.Step, r.Code, r.Result)
			}
			t.Logf("forward port, %s: refused at %s: %s", mode, r.Step, r.Err)
		}
	}

	// (c) uid 65534 on the Unix sockets: nothing on n3 (no allow-list),
	// reads only on n2 (gid 65534 has the read role), worker calls only on
	// n1 (uid 65534 has the worker role).
	call := func(nobody bool, addr string, pairs ...string) []attackReport {
		return atk.run(nobody, append([]string{"call", "--addr", addr}, pairs...)...)
	}
	const (
		set    = `{"max_running_runs":5}`
		claim  = `{"worker_id":"w-attacker","types":["attack-probe"],"wait_ms":0}`
		submit = `{"workflow":{"name":"forged","tasks":[{"key":"a","type":"echo"}]}}`
	)
	denied := rpc.CodePermissionDenied
	wantCodes(t, "n3 socket, no role", call(true, "unix://"+byID["n3"].sock, "cluster.status", "{}", "settings.set", set, "task.claim", claim, "run.submit", submit),
		denied, denied, denied, denied)
	wantCodes(t, "n2 socket, read role by gid", call(true, "unix://"+byID["n2"].sock, "cluster.status", "{}", "settings.set", set, "task.claim", claim, "run.submit", submit),
		0, denied, denied, denied)
	wantCodes(t, "n1 socket, worker role by uid", call(true, "unix://"+byID["n1"].sock, "task.claim", claim, "settings.set", set,
		"snapshot.save", `{"path":"stolen"}`, "operator.raft.remove_peer", `{"id":"n3"}`, "acl.token.create", `{"role":"admin"}`, "run.submit", submit),
		0, denied, denied, denied, denied, denied)
	if b, _ := os.ReadFile(byID["n3"].dir + ".log"); !strings.Contains(string(b), "uid=65534") {
		t.Fatalf("n3 did not log the refused caller's uid:\n%s", tail(string(b), 20))
	}

	// (d) The TCP client listener (TLS): without a token a write is
	// refused; a bogus token is refused; a worker token claims and is
	// refused settings.set.
	tcp := "tls://" + clientAddr[follower.id]
	wantCodes(t, "TCP, no token", call(true, tcp, "run.submit", submit, "settings.set", set, "cluster.status", "{}"), denied, denied, denied)
	// (The agent closes a connection whose token it refused.)
	if rs := atk.run(true, "call", "--addr", tcp, "--token", "flowd_not-a-token", "run.submit", submit); len(rs) != 2 || rs[0].Code != denied || rs[1].answered() {
		t.Fatalf("TCP, bogus token: %+v", rs)
	}
	rs := atk.run(true, "call", "--addr", tcp, "--token", tok.Secret, "task.claim", claim, "settings.set", set, "run.submit", submit)
	wantCodes(t, "TCP, worker token", rs, 0, 0, denied, denied)
	if !strings.Contains(string(rs[0].Result), `"worker"`) {
		t.Fatalf("agent.auth with the worker token: %s", rs[0].Result)
	}

	// (f) A crafted snapshot (26 bytes declaring a 1 GiB record): uid 65534
	// may not restore at all; an admin (root) who restores it is refused
	// and the leader's memory does not jump (it allocated 1.1 GB before).
	wantCodes(t, "n1 socket, worker restores", call(true, "unix://"+byID["n1"].sock, "snapshot.restore", `{"path":"crafted.snap"}`), denied)
	pid := leader.cmd.Process.Pid
	clearPeak(t, pid)
	rssBefore := rssKB(t, pid)
	rs = atk.run(false, "snapshot", "--dir", filepath.Join(leader.dir, "snapshots"), "--name", "crafted.snap", "--sock", leader.sock)
	if len(rs) != 2 || rs[0].N != 26 || rs[1].Code != rpc.CodeInvalidParams || !strings.Contains(rs[1].Message, "truncated record") {
		t.Fatalf("crafted snapshot restore: %+v", rs)
	}
	peak := hwmKB(t, pid)
	t.Logf("crafted snapshot: %s; leader RSS %d MB before, peak %d MB", rs[1].Message, rssBefore/1024, peak/1024)
	if peak-rssBefore > 32<<10 {
		t.Fatalf("restoring the crafted snapshot raised the leader's peak RSS by %d MB (from %d MB)", (peak-rssBefore)/1024, rssBefore/1024)
	}

	// (e) 50 connections of uid 65534 each hold 3.9 MB of an unfinished
	// line on n1's socket. The documented bound (docs/operations.md,
	// "Limits on clients"): over the RSS at rest, 2 x --max-partial-bytes
	// (32 MiB held, and as much again of dropped lines that are garbage
	// until the collector runs, which it does when the heap has doubled),
	// 64 KiB of read buffer per connection, and the heap at rest doubling
	// too (at most the RSS at rest), plus 16 MiB for the collector's
	// overshoot. 412 MB, linear in the connections, before the budget.
	const conns, maxPartial = 50, 32 << 20
	target := byID["n1"]
	pid = target.cmd.Process.Pid
	clearPeak(t, pid)
	rssBefore = rssKB(t, pid)
	hold := atk.command(true, "partial", "--sock", target.sock, "--conns", fmt.Sprint(conns), "--bytes", "3900000")
	stdin, _ := hold.StdinPipe()
	stdout, _ := hold.StdoutPipe()
	hold.Stderr = os.Stderr
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("partial-line attacker: %v", err)
	}
	if r := parseReports(t, line); r[0].Step != "holding" || r[0].N != conns || r[0].Err != "" {
		t.Fatalf("partial-line attacker: %+v", r)
	}
	// The attacker's writes are done; the agent reads what is left in the
	// socket buffers: poll until its peak stops moving.
	peak = hwmKB(t, pid)
	for deadline, still := time.Now().Add(5*time.Second), 0; still < 3 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond) // polling another process's memory
		if p := hwmKB(t, pid); p == peak {
			still++
		} else {
			peak, still = p, 0
		}
	}
	rssHeld := rssKB(t, pid)
	if st := c.status(target); st == nil {
		t.Fatal("n1 does not answer cluster.status while the lines are held")
	}
	_ = stdin.Close()
	_, _ = io.Copy(io.Discard, stdout)
	if err := hold.Wait(); err != nil {
		t.Fatalf("partial-line attacker: %v", err)
	}
	bound := (2*maxPartial+conns*lineBuf+16<<20)>>10 + rssBefore
	t.Logf("partial lines: n1 RSS %d MB before, %d MB while %d x 3.9 MB are held, peak %d MB (bound: %d MB over the start)",
		rssBefore/1024, rssHeld/1024, conns, peak/1024, bound/1024)
	if peak-rssBefore > bound {
		t.Fatalf("%d x 3.9 MB partial lines raised n1's peak RSS by %d MB (from %d MB), over the documented bound of %d MB", conns, (peak-rssBefore)/1024, rssBefore/1024, bound/1024)
	}

	// After the attacks: nothing applied (the same digest at the same index
	// on every replica, the same runs, settings and tokens), no forged run,
	// and the cluster still serves a write through a follower.
	after := snapshotState(t, c)
	if after.digests["n1"] != before.digests["n1"] || after.runs != before.runs || after.settings != before.settings || after.tk != before.tk {
		t.Fatalf("the state changed during the attacks:\nbefore %+v\nafter  %+v", before, after)
	}
	cl := c.client(follower)
	for id := range forged {
		if _, err := cl.RunGet(ctx, id); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("forged run %s: %v", id, err)
		}
	}
	res, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"name":"after","tasks":[{"key":"a","type":"echo"}]}`)})
	if err != nil {
		t.Fatalf("a write through %s after the attacks: %v", follower.id, err)
	}
	if _, err := cl.RunGet(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
	if got := c.waitLeader(); got != leader {
		t.Fatalf("leadership moved from %s to %s during the attacks", leader.id, got.id)
	}
	t.Logf("every attack refused; state unchanged at index %d (%s); %s in all", before.digests["n1"].AppliedIndex, before.digests["n1"].Digest[:12], time.Since(start).Round(time.Millisecond))
}
