package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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

// Storage damage between real agent processes (issue 10, items 5 and 6):
// each case ends with the damaged node refusing to serve (a clean stop with
// exit code 70 and a clear message) while the other two keep serving.

const exitStorage = 70

// startHTTPCluster is startCluster with an --http-addr per agent; dirOf,
// if set, chooses an agent's data dir.
func startHTTPCluster(t *testing.T, dirOf func(i int) string) (*cluster, map[*agent]string) {
	t.Helper()
	base := t.TempDir()
	c := &cluster{t: t}
	httpOf := map[*agent]string{}
	var peers []string
	for i := 1; i <= 3; i++ {
		dir := filepath.Join(base, fmt.Sprintf("n%d", i))
		if dirOf != nil && dirOf(i) != "" {
			dir = dirOf(i)
		}
		a := &agent{id: fmt.Sprintf("n%d", i), dir: dir,
			sock: filepath.Join(base, fmt.Sprintf("n%d.sock", i)),
			raft: fmt.Sprintf("127.0.0.1:%d", freePort(t)), fwd: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
		httpOf[a] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		peers = append(peers, a.id+"="+a.raft)
		c.agents = append(c.agents, a)
	}
	for _, a := range c.agents {
		a.args = []string{"agent", "--node-id", a.id, "--data-dir", a.dir, "--raft-addr", a.raft, "--forward-addr", a.fwd,
			"--socket", a.sock, "--peers", strings.Join(peers, ","), "--raft-heartbeat-timeout", "300ms",
			"--raft-election-timeout", "300ms", "--log-level", "info", "--http-addr", httpOf[a]}
		c.start(a)
	}
	t.Cleanup(c.stopAll)
	c.waitLeader()
	return c, httpOf
}

// readyz returns /readyz's status code (0 if the agent does not answer).
func readyz(addr string) (int, string) {
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReady polls an agent's /readyz until it answers 200.
func waitReady(t *testing.T, addr string) {
	t.Helper()
	// polling an external process
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, addr+" to be ready", func() error {
		code, body := readyz(addr)
		if code == 200 {
			return nil
		}
		return fmt.Errorf("%d %s", code, body)
	})
}

// waitExit waits for an agent process to end and returns its exit code.
func waitExit(t *testing.T, a *agent, within time.Duration) int {
	t.Helper()
	select {
	case <-a.exited:
	case <-time.After(within):
		t.Fatalf("%s did not stop within %s", a.id, within)
	}
	a.log.Close()
	return a.cmd.ProcessState.ExitCode()
}

func agentLog(a *agent) string {
	b, _ := os.ReadFile(a.dir + ".log")
	if len(b) == 0 {
		b, _ = os.ReadFile(filepath.Join(filepath.Dir(a.sock), a.id+".log"))
	}
	return string(b)
}

func submitN(t *testing.T, cl *rpc.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range n {
		wf := json.RawMessage(fmt.Sprintf(`{"tasks":[{"key":"a","type":"t","input":{"i":%d,"pad":"%s"}}]}`, i, strings.Repeat("p", 200)))
		if _, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: wf}); err != nil {
			t.Fatal(err)
		}
	}
}

// The healthy two go on serving writes after the third was damaged.
func othersServe(t *testing.T, c *cluster, damaged *agent) {
	t.Helper()
	var rest []*agent
	for _, a := range c.agents {
		if a != damaged {
			rest = append(rest, a)
		}
	}
	c.waitLeader(damaged)
	submitN(t, c.client(rest...), 3)
}

// 4 KB of garbage in an SST of a stopped follower: on restart the table's
// checksum fails, and the agent refuses to start (it used to start with
// the table's keys silently missing).
func TestStorageGarbageInSSTRefusesToStart(t *testing.T) {
	c, httpOf := startHTTPCluster(t, nil)
	leader := c.waitLeader()
	submitN(t, c.client(leader), 300)
	f := c.followers(leader)[0]
	waitReady(t, httpOf[f])
	_ = f.cmd.Process.Signal(syscall.SIGTERM) // a clean stop flushes the memtable into an SST
	if code := waitExit(t, f, 15*time.Second); code != 0 {
		t.Fatalf("clean stop exited %d", code)
	}
	ssts, _ := filepath.Glob(filepath.Join(f.dir, "state", "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no SST to damage")
	}
	fi, err := os.Stat(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	off := max(fi.Size()/2-2048, 0)
	garbage := make([]byte, min(4096, fi.Size()))
	for i := range garbage {
		garbage[i] = byte(i*7 + 13)
	}
	fh, err := os.OpenFile(ssts[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt(garbage, off); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	c.restart(f)
	if code := waitExit(t, f, 20*time.Second); code != exitStorage {
		t.Fatalf("damaged follower exited %d, want %d\n%s", code, exitStorage, tail(agentLog(f), 20))
	}
	log := agentLog(f)
	if !strings.Contains(log, "refuses to start") || !strings.Contains(strings.ToLower(log), "checksum") {
		t.Fatalf("no clear message:\n%s", tail(log, 20))
	}
	othersServe(t, c, f)
}

// The data dir of a running follower deleted: /readyz fails at once and the
// node stops (exit 70) instead of acknowledging writes into deleted files.
func TestStorageDeletedDataDirStopsTheNode(t *testing.T) {
	c, httpOf := startHTTPCluster(t, nil)
	leader := c.waitLeader()
	f := c.followers(leader)[0]
	waitReady(t, httpOf[f])
	if err := os.RemoveAll(f.dir); err != nil {
		t.Fatal(err)
	}
	if code, body := readyz(httpOf[f]); code == 200 {
		t.Fatalf("/readyz still 200 with the data dir gone: %s", body)
	}
	if code := waitExit(t, f, 10*time.Second); code != exitStorage {
		t.Fatalf("exited %d, want %d", code, exitStorage)
	}
	if log := agentLog(f); !strings.Contains(log, "deleted or replaced") {
		t.Fatalf("no clear message:\n%s", tail(log, 20))
	}
	othersServe(t, c, f)
}

// The raft log made immutable under a running follower (bolt: raft.db;
// wal: its segment files): its next append fails, and the node stops at
// once (it used to loop on "failed to append to logs" with /readyz 200).
func TestStorageImmutableRaftLogStopsTheNode(t *testing.T) {
	for _, store := range []string{"bolt", "wal"} {
		t.Run(store, func(t *testing.T) {
			t.Setenv("FLOWD_RAFT_LOG_STORE", store) // the agents inherit the environment
			c, httpOf := startHTTPCluster(t, nil)
			leader := c.waitLeader()
			f := c.followers(leader)[0]
			waitReady(t, httpOf[f])
			files := []string{filepath.Join(f.dir, "raft", "raft.db")}
			if store == "wal" {
				files, _ = filepath.Glob(filepath.Join(f.dir, "raft", "wal", "*.wal"))
			}
			if len(files) == 0 {
				t.Fatalf("no %s log files in %s", store, filepath.Join(f.dir, "raft"))
			}
			for _, p := range files {
				if out, err := exec.Command("chattr", "+i", p).CombinedOutput(); err != nil {
					t.Skipf("chattr +i not supported here: %v %s", err, out)
				}
				t.Cleanup(func() { _ = exec.Command("chattr", "-i", p).Run() })
			}
			submitN(t, c.client(leader), 1)
			if code := waitExit(t, f, 10*time.Second); code != exitStorage {
				t.Fatalf("exited %d, want %d\n%s", code, exitStorage, tail(agentLog(f), 20))
			}
			if code, _ := readyz(httpOf[f]); code == 200 {
				t.Fatal("/readyz 200 after the log store failed")
			}
			if log := agentLog(f); !strings.Contains(log, "raft log append") {
				t.Fatalf("no clear message:\n%s", tail(log, 20))
			}
			othersServe(t, c, f)
		})
	}
}

// A full disk (a small tmpfs made for the test, filled up): the follower
// stops with a logged "disk full" and exit 70, not a SIGBUS crash.
func TestStorageDiskFullIsACleanStop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=200m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	c, httpOf := startHTTPCluster(t, func(i int) string {
		if i == 3 {
			return filepath.Join(mnt, "n3")
		}
		return ""
	})
	f := c.agents[2]
	leader := c.waitLeader() // f may lead: its appends fail the same way
	waitReady(t, httpOf[f])
	// Fill the file system to below the agent's 128 MiB floor.
	if out, err := exec.Command("fallocate", "-l", "100M", filepath.Join(mnt, "filler")).CombinedOutput(); err != nil {
		t.Fatalf("fallocate: %v %s", err, out)
	}
	_ = leader
	// One write is enough; f may be the leader, so write through the
	// others until f has stopped (their leader changes meanwhile).
	cl := c.client(c.agents[0], c.agents[1])
	go func() {
		for {
			select {
			case <-f.exited:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, _ = cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t"}]}`)})
			cancel()
		}
	}()
	code := waitExit(t, f, 10*time.Second)
	log := agentLog(f)
	if code != exitStorage || !strings.Contains(log, "disk full") || strings.Contains(log, "SIGBUS") {
		t.Fatalf("exited %d, want %d with \"disk full\"\n%s", code, exitStorage, tail(log, 20))
	}
	othersServe(t, c, f)
}
