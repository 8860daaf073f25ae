package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Security acceptance (issue 11): real attacker processes against a real
// agent.

// startOne starts a one-node cluster with extra agent flags, its socket
// reachable by every local user (mode 0666 in a 0755 directory), so that
// the only thing between an unprivileged user and the API is the agent's
// own SO_PEERCRED check.
func startOne(t *testing.T, extra ...string) *cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (to run the attacker as uid nobody)")
	}
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a := &agent{id: "n1", dir: filepath.Join(base, "n1"), sock: filepath.Join(base, "n1.sock"),
		raft: fmt.Sprintf("127.0.0.1:%d", freePort(t)), fwd: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	a.args = append([]string{"agent", "--node-id", a.id, "--data-dir", a.dir, "--raft-addr", a.raft, "--forward-addr", a.fwd,
		"--socket", a.sock, "--peers", "n1=" + a.raft, "--raft-heartbeat-timeout", "300ms",
		"--raft-election-timeout", "300ms", "--log-level", "info"}, extra...)
	c := &cluster{t: t, agents: []*agent{a}}
	c.start(a)
	t.Cleanup(c.stopAll)
	c.waitLeader()
	if err := os.Chmod(a.sock, 0o666); err != nil {
		t.Fatal(err)
	}
	return c
}

// asNobody runs `flowd rpc METHOD PARAMS` as uid/gid 65534 with no
// supplementary groups and returns its combined output.
func asNobody(t *testing.T, sock, method, params string) (string, error) {
	t.Helper()
	cmd := exec.Command("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
		flowdBin, "rpc", method, params, "--addr", "unix://"+sock, "--timeout", "5s", "-o", "json")
	cmd.Env = append(os.Environ(), "HOME=/")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestSecurityNobodyRefusedOnTheSocket(t *testing.T) {
	c := startOne(t)
	sock := c.agents[0].sock
	out, err := asNobody(t, sock, "settings.set", `{"max_running_runs":5}`)
	if err == nil || !strings.Contains(out, "-32007") {
		t.Fatalf("uid nobody: settings.set answered %v:\n%s", err, out)
	}
	out, err = asNobody(t, sock, "cluster.status", `{}`)
	if err == nil || !strings.Contains(out, "-32007") {
		t.Fatalf("uid nobody: cluster.status answered %v:\n%s", err, out)
	}
	// The socket owner (root, the agent's uid) keeps everything.
	r := dialRaw(t, sock)
	if m := r.send(`{"jsonrpc":"2.0","id":1,"method":"settings.set","params":{"max_running_runs":5}}`); errCode(m) != 0 {
		t.Fatalf("root: settings.set: %v", m)
	}
	log, _ := os.ReadFile(c.agents[0].dir + ".log")
	if !bytes.Contains(log, []byte("uid=65534")) {
		t.Fatalf("the refusal is not logged with the caller's uid:\n%s", tail(string(log), 20))
	}
}

func TestSecurityWorkerRoleCannotChangeSettings(t *testing.T) {
	c := startOne(t, "--allow-worker-uids", "65534")
	sock := c.agents[0].sock
	out, err := asNobody(t, sock, "settings.set", `{"max_running_runs":5}`)
	if err == nil || !strings.Contains(out, "-32007") {
		t.Fatalf("worker: settings.set answered %v:\n%s", err, out)
	}
	for _, m := range []string{"snapshot.save", "operator.raft.remove_peer", "run.submit", "events.subscribe"} {
		out, err := asNobody(t, sock, m, `{}`)
		if err == nil || !strings.Contains(out, "-32007") {
			t.Fatalf("worker: %s answered %v:\n%s", m, err, out)
		}
	}
	out, err = asNobody(t, sock, "task.claim", `{"worker_id":"w-nobody","wait_ms":0}`)
	if err != nil || !strings.Contains(out, "tasks") {
		t.Fatalf("worker: task.claim failed: %v\n%s", err, out)
	}
	log, _ := os.ReadFile(c.agents[0].dir + ".log")
	if !bytes.Contains(log, []byte("permission denied")) || !bytes.Contains(log, []byte("method=settings.set")) {
		t.Fatalf("the denial is not logged:\n%s", tail(string(log), 20))
	}
}

// TestSecurityPartialLinesBoundedRSS: 50 connections each send 3.9 MB of a
// request line and never its newline. The agent holds at most
// --max-partial-bytes (32 MiB) of partial lines in all, plus its 64 KiB
// read buffer per connection; the others' lines are dropped (-32004). What
// a dropped line held is garbage until the next GC, so the bound on the
// agent's memory for this is about 2 x 32 MiB + 50 x 64 KiB.
// Before the budget this cost ~412 MB of RSS.
func TestSecurityPartialLinesBoundedRSS(t *testing.T) {
	c := startOne(t)
	a := c.agents[0]
	pid := a.cmd.Process.Pid
	before := rssKB(t, pid)
	const conns, size = 50, 3_900_000
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []net.Conn
	for range conns {
		wg.Go(func() {
			nc, err := net.Dial("unix", a.sock)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			held = append(held, nc)
			mu.Unlock()
			_ = nc.SetWriteDeadline(time.Now().Add(60 * time.Second))
			_, _ = nc.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"run.submit","params":{"pad":"`))
			for sent := 0; sent < size; sent += len(chunk) {
				if _, err := nc.Write(chunk[:min(len(chunk), size-sent)]); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	time.Sleep(time.Second) // let the agent read what is in the socket buffers
	peak, now := hwmKB(t, pid), rssKB(t, pid)
	t.Logf("agent RSS: %d MB before, %d MB with %d x %.1f MB partial lines (peak %d MB)",
		before/1024, now/1024, conns, float64(size)/1e6, peak/1024)
	// The agent must still serve while they hang.
	r := dialRaw(t, a.sock)
	if m := r.send(`{"jsonrpc":"2.0","id":1,"method":"cluster.status"}`); errCode(m) != 0 {
		t.Fatalf("cluster.status during the attack: %v", m)
	}
	if limit := int64(before + 100*1024); peak > limit {
		t.Fatalf("peak RSS %d MB exceeds the documented bound (%d MB at start + 100 MB)", peak/1024, before/1024)
	}
	for _, nc := range held {
		nc.Close()
	}
}

func procStatus(t *testing.T, pid int, key string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, key+":") {
			n, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

func rssKB(t *testing.T, pid int) int64 { return procStatus(t, pid, "VmRSS") }
func hwmKB(t *testing.T, pid int) int64 { return procStatus(t, pid, "VmHWM") }
