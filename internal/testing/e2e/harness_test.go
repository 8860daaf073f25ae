package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testing/testutil"

	"github.com/flowd/flowd/rpc"
)

var (
	flowdBin  string // built once in TestMain
	workerBin string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "flowd-e2e-bin")
	if err != nil {
		panic(err)
	}
	root := repoRoot()
	flowdBin, workerBin = filepath.Join(dir, "flowd"), filepath.Join(dir, "example-worker")
	for out, pkg := range map[string]string{flowdBin: "./cmd/flowd", workerBin: "./examples/worker"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func freePort(t testing.TB) int { return testutil.Port(t) }

// agent is one flowd agent process.
type agent struct {
	id, dir, sock, raft, fwd string
	args                     []string
	bin                      string // the binary to start ("": flowdBin)
	cmd                      *exec.Cmd
	exited                   chan struct{}
	log                      *os.File
}

// cluster is three real agent processes.
type cluster struct {
	t      testing.TB
	agents []*agent
}

func startCluster(t testing.TB, n int) *cluster { return startClusterWith(t, n) }

// startClusterWith starts n agents with extra flags appended to each
// agent's command line.
func startClusterWith(t testing.TB, n int, extra ...string) *cluster {
	t.Helper()
	return startClusterTimed(t, n, append([]string{"--raft-heartbeat-timeout", "300ms", "--raft-election-timeout", "300ms"}, extra...)...)
}

// startClusterTimed is startCluster with these flags (raft timing among
// them) instead of the 300 ms heartbeat and election timeouts.
func startClusterTimed(t testing.TB, n int, timing ...string) *cluster {
	t.Helper()
	base := t.TempDir()
	c := &cluster{t: t}
	var peers []string
	for i := 1; i <= n; i++ {
		a := &agent{id: fmt.Sprintf("n%d", i), dir: filepath.Join(base, fmt.Sprintf("n%d", i)),
			sock: filepath.Join(base, fmt.Sprintf("n%d.sock", i)),
			raft: fmt.Sprintf("127.0.0.1:%d", freePort(t)), fwd: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
		peers = append(peers, a.id+"="+a.raft)
		c.agents = append(c.agents, a)
	}
	for _, a := range c.agents {
		a.args = []string{"agent", "--node-id", a.id, "--data-dir", a.dir, "--raft-addr", a.raft, "--forward-addr", a.fwd,
			"--socket", a.sock, "--peers", strings.Join(peers, ","), "--log-level", "info"}
		a.args = append(a.args, timing...)
		c.start(a)
	}
	t.Cleanup(c.stopAll)
	c.waitLeader()
	return c
}

func (c *cluster) start(a *agent) {
	c.t.Helper()
	f, err := os.OpenFile(a.dir+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	a.log = f
	bin := a.bin
	if bin == "" {
		bin = flowdBin
	}
	a.cmd = exec.Command(bin, a.args...)
	a.cmd.Stdout, a.cmd.Stderr = f, f
	if err := a.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	a.exited = make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(a.exited) }()
}

// kill9 kills an agent with SIGKILL: no clean shutdown at all.
func (c *cluster) kill9(a *agent) {
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.exited
	a.log.Close()
}

// restart starts a stopped agent again with the same flags and data dir.
func (c *cluster) restart(a *agent) { c.start(a) }

func (c *cluster) stopAll() {
	for _, a := range c.agents {
		if a.cmd != nil && a.cmd.Process != nil {
			_ = a.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, a := range c.agents {
		if a.exited == nil {
			continue
		}
		select {
		case <-a.exited:
		case <-time.After(15 * time.Second):
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
		a.log.Close()
		if c.t.Failed() {
			b, _ := os.ReadFile(a.dir + ".log")
			c.t.Logf("--- log of %s (tail) ---\n%s", a.id, tail(string(b), 30))
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (c *cluster) endpoints() []string {
	var out []string
	for _, a := range c.agents {
		out = append(out, "unix://"+a.sock)
	}
	return out
}

// client returns a protocol client for one agent (or, with no agent, for
// the whole endpoint list).
func (c *cluster) client(only ...*agent) *rpc.Client {
	c.t.Helper()
	eps := c.endpoints()
	if len(only) > 0 {
		eps = nil
		for _, a := range only {
			eps = append(eps, "unix://"+a.sock)
		}
	}
	cl, err := rpc.NewClient(eps, rpc.ClientOptions{MaxAttempts: 50, BackoffCap: 300 * time.Millisecond})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// status asks one agent for cluster.status (nil if unreachable).
func (c *cluster) status(a *agent) *rpc.ClusterStatus {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := rpc.Dial(ctx, "unix://"+a.sock, rpc.ConnOptions{})
	if err != nil {
		return nil
	}
	defer conn.Close()
	var st rpc.ClusterStatus
	if conn.Call(ctx, rpc.MethodClusterStatus, struct{}{}, &st) != nil {
		return nil
	}
	return &st
}

// waitLeader waits until a live agent reports itself leader and returns it.
// It polls cluster.status: the agents are other processes, and their
// sockets are the only way to observe them.
func (c *cluster) waitLeader(exclude ...*agent) *agent {
	c.t.Helper()
	var leader *agent
	// readiness polling of external processes
	testutil.EventuallyTrue(c.t, 20*time.Second, 50*time.Millisecond, "a leader", func() bool {
		for _, a := range c.agents {
			if contains(exclude, a) {
				continue
			}
			if st := c.status(a); st != nil && st.State == "leader" {
				leader = a
				return true
			}
		}
		return false
	})
	return leader
}

func contains(as []*agent, a *agent) bool {
	for _, x := range as {
		if x == a {
			return true
		}
	}
	return false
}

func (c *cluster) followers(leader *agent) []*agent {
	var out []*agent
	for _, a := range c.agents {
		if a != leader {
			out = append(out, a)
		}
	}
	return out
}

// rawConn is an independent protocol client: bytes on a socket, no Go
// client code involved.
type rawConn struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
}

func dialRaw(t testing.TB, sock string) *rawConn {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawConn{t: t, conn: conn, r: bufio.NewReaderSize(conn, 1<<20)}
}

// send writes one line and reads one response line.
func (r *rawConn) send(line string) map[string]any {
	r.t.Helper()
	_ = r.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.conn.Write([]byte(line + "\n")); err != nil {
		r.t.Fatal(err)
	}
	for {
		resp, err := r.r.ReadBytes('\n')
		if err != nil {
			r.t.Fatalf("read reply to %.80s: %v", line, err)
		}
		var m map[string]any
		if err := json.Unmarshal(resp, &m); err != nil {
			r.t.Fatalf("reply is not JSON: %s", resp)
		}
		if _, isNote := m["method"]; isNote {
			continue
		}
		return m
	}
}

func errCode(m map[string]any) int {
	e, ok := m["error"].(map[string]any)
	if !ok {
		return 0
	}
	return int(e["code"].(float64))
}
