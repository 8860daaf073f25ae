package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testing/testutil"

	"github.com/google/uuid"

	"github.com/flowd/flowd/rpc"
)

// TestTmuxE2E drives `flowd tui` in a real terminal (tmux) against three
// real agents: a submitted run appears and turns succeeded with no key
// pressed; a filter; drilling into a run and a task; cancelling a run
// through the dialog; kill -9 of the connected agent and the reconnect to
// another; quitting with q. It waits on screen content (capture-pane,
// polled), never on fixed sleeps; keys are sent only once the screen shows
// the previous key's effect.
func TestTmuxE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("tmux end-to-end test skipped with -short")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: skipping the TUI end-to-end test (apt-get install tmux)")
	}
	dir := shortTempDir(t)
	bin := buildFlowd(t, dir)
	agents := startAgents(t, bin, dir)
	eps := make([]string, len(agents))
	for i, a := range agents {
		eps[i] = "unix://" + a.sock
	}
	client, err := rpc.NewClient(eps, rpc.ClientOptions{MaxAttempts: 50, BackoffCap: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	tm := startTmux(t, bin, dir, eps)
	tm.wait("the header is live with every peer up", func(s string) bool {
		return strings.Contains(s, "● live") && strings.Contains(s, "peers 3/3")
	})

	// 1. A run appears, then turns succeeded without any key press: the
	// worker starts only once the TUI shows the run running.
	fast := submit(t, client, `{"name":"e2e-fast","tasks":[{"key":"a","type":"echo"},{"key":"b","type":"echo","deps":["a"]}]}`)
	tm.wait("the submitted run running", func(s string) bool { return rowHas(s, shortID(fast), "● running") })
	go work(ctx, client)
	tm.wait("the run succeeded, pushed by events", func(s string) bool {
		return rowHas(s, shortID(fast), "✓ succeeded") && rowHas(s, shortID(fast), "2/2")
	})

	// A run whose task nobody serves stays running: it is the one to cancel.
	slow := submit(t, client, `{"name":"e2e-slow","tasks":[{"key":"wait-here","type":"nobody"}]}`)
	tm.wait("the slow run", func(s string) bool { return rowHas(s, shortID(slow), "● running") })

	// 2. Filter.
	tm.press("/", "the filter prompt", func(s string) bool { return strings.Contains(s, "/█") })
	tm.typeText("e2e-slow")
	tm.wait("the typed filter", func(s string) bool { return strings.Contains(s, "/e2e-slow█") })
	tm.press("Enter", "the filtered list", func(s string) bool {
		return strings.Contains(s, `filter "e2e-slow" (1 match)`) && !strings.Contains(s, shortID(fast))
	})

	// 3. Drill into the run, then its task.
	tm.press("Enter", "the run detail", func(s string) bool {
		return strings.Contains(s, "Run "+slow) && strings.Contains(s, "wait-here")
	})
	tm.press("Enter", "the task detail", func(s string) bool {
		return strings.Contains(s, "Task wait-here") && strings.Contains(s, "Attempts")
	})
	tm.press("Escape", "back to the run", func(s string) bool { return strings.Contains(s, "[Tasks]") })

	// 4. Cancel it through the confirm dialog.
	tm.press("c", "the confirm dialog", func(s string) bool { return strings.Contains(s, "Cancel run "+shortID(slow)+"?") })
	tm.press("y", "the run cancelled", func(s string) bool {
		return strings.Contains(s, "cancel accepted") && strings.Contains(s, "⊘ cancelled")
	})
	tm.press("Escape", "the runs screen", func(s string) bool { return strings.Contains(s, "[1 Runs]") })
	tm.press("Escape", "the filter cleared", func(s string) bool {
		return !strings.Contains(s, "filter \"") && rowHas(s, shortID(fast), "✓ succeeded")
	})

	// 5. kill -9 the agent the TUI is connected to; it reconnects to another.
	node := regexp.MustCompile(`node (n\d)`).FindStringSubmatch(tm.screen())
	if node == nil {
		t.Fatalf("no node in the header:\n%s", tm.screen())
	}
	var victim *e2eAgent
	for _, a := range agents {
		if a.id == node[1] {
			victim = a
		}
	}
	victim.kill9()
	tm.wait("reconnected to another node", func(s string) bool {
		m := regexp.MustCompile(`flowd ● live · node (n\d)`).FindStringSubmatch(s)
		return m != nil && m[1] != victim.id
	})
	tm.wait("the data still there", func(s string) bool { return rowHas(s, shortID(fast), "✓ succeeded") })

	// 6. q quits from the top screen.
	tm.sendKeys("q")
	tm.waitExit()
}

// rowHas reports whether one screen line contains every text.
func rowHas(screen string, texts ...string) bool {
	for _, l := range strings.Split(screen, "\n") {
		ok := true
		for _, s := range texts {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			return true
		}
	}
	return false
}

func submit(t *testing.T, c *rpc.Client, spec string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(spec), ID: uuid.Must(uuid.NewV7()).String()})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// work completes every echo task until ctx ends (a tiny in-test worker).
func work(ctx context.Context, c *rpc.Client) {
	for ctx.Err() == nil {
		tasks, err := c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "e2e-worker", Types: []string{"echo"}, Max: 4, WaitMS: 1000})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond): // back off after a failover
			}
			continue
		}
		for _, tk := range tasks {
			_, _ = c.TaskComplete(ctx, rpc.CompleteParams{TaskID: tk.TaskID, FencingToken: tk.FencingToken, Result: json.RawMessage(`{"ok":true}`)})
		}
	}
}

// --- processes ---

func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tui-e2e") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func buildFlowd(t *testing.T, dir string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	bin := filepath.Join(dir, "flowd")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/flowd")
	cmd.Dir = filepath.Join(filepath.Dir(here), "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/flowd: %v\n%s", err, out)
	}
	return bin
}

type e2eAgent struct {
	id, sock string
	cmd      *exec.Cmd
	exited   chan struct{}
}

func (a *e2eAgent) kill9() {
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.exited
}

func freeAddr(t *testing.T) string { return fmt.Sprintf("127.0.0.1:%d", testutil.Port(t)) }

func startAgents(t *testing.T, bin, dir string) []*e2eAgent {
	t.Helper()
	var agents []*e2eAgent
	var peers, rafts []string
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		raft := freeAddr(t)
		rafts = append(rafts, raft)
		peers = append(peers, id+"="+raft)
		agents = append(agents, &e2eAgent{id: id, sock: filepath.Join(dir, id+".sock"), exited: make(chan struct{})})
	}
	for i, a := range agents {
		log, err := os.Create(filepath.Join(dir, a.id+".log"))
		if err != nil {
			t.Fatal(err)
		}
		a.cmd = exec.Command(bin, "agent", "--node-id", a.id, "--data-dir", filepath.Join(dir, a.id), "--raft-addr", rafts[i],
			"--forward-addr", freeAddr(t), "--socket", a.sock, "--peers", strings.Join(peers, ","),
			"--raft-heartbeat-timeout", "300ms", "--raft-election-timeout", "300ms")
		a.cmd.Stdout, a.cmd.Stderr = log, log
		if err := a.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = a.cmd.Wait(); log.Close(); close(a.exited) }()
	}
	t.Cleanup(func() {
		for _, a := range agents {
			_ = a.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, a := range agents {
			select {
			case <-a.exited:
			case <-time.After(10 * time.Second):
				_ = a.cmd.Process.Kill()
				<-a.exited
			}
		}
		if t.Failed() {
			for _, a := range agents {
				b, _ := os.ReadFile(filepath.Join(dir, a.id+".log"))
				t.Logf("--- %s log (tail) ---\n%s", a.id, lastLines(string(b), 15))
			}
		}
	})
	// Wait for a leader: the agents are other processes, their sockets the
	// only way to observe them.
	testutil.EventuallyTrue(t, 20*time.Second, 50*time.Millisecond, "a leader", func() bool {
		for _, a := range agents {
			if st := probeStatus(a.sock); st != nil && st.LeaderID != "" {
				return true
			}
		}
		return false
	})
	return agents
}

func probeStatus(sock string) *rpc.ClusterStatus {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := rpc.Dial(ctx, "unix://"+sock, rpc.ConnOptions{})
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

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// --- tmux ---

type tmuxTUI struct {
	t      *testing.T
	socket string // a private tmux server
}

func startTmux(t *testing.T, bin, dir string, eps []string) *tmuxTUI {
	t.Helper()
	tm := &tmuxTUI{t: t, socket: filepath.Join(dir, "tmux.sock")}
	cmdline := fmt.Sprintf("env TERM=xterm-256color LANG=C.UTF-8 NO_COLOR=1 %s tui --addr %s 2>%s", bin, strings.Join(eps, ","),
		filepath.Join(dir, "tui.stderr"))
	if out, err := tm.tmux("-u", "new-session", "-d", "-s", "tui", "-x", "160", "-y", "45", cmdline); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = tm.tmux("kill-server") })
	return tm
}

func (tm *tmuxTUI) tmux(args ...string) (string, error) {
	out, err := exec.Command("tmux", append([]string{"-S", tm.socket}, args...)...).CombinedOutput()
	return string(out), err
}

func (tm *tmuxTUI) screen() string {
	out, _ := tm.tmux("capture-pane", "-p", "-t", "tui")
	return out
}

func (tm *tmuxTUI) sendKeys(keys ...string) {
	if out, err := tm.tmux(append([]string{"send-keys", "-t", "tui"}, keys...)...); err != nil {
		tm.t.Fatalf("send-keys %v: %v %s", keys, err, out)
	}
}

func (tm *tmuxTUI) typeText(s string) {
	if out, err := tm.tmux("send-keys", "-t", "tui", "-l", s); err != nil {
		tm.t.Fatalf("send-keys -l %q: %v %s", s, err, out)
	}
}

// poll checks the screen every 50ms (polling visible content, not a fixed
// wait) until ok or d has passed; its error shows the last screen.
func (tm *tmuxTUI) poll(d time.Duration, what string, ok func(string) bool) error {
	return testutil.Poll(d, 50*time.Millisecond, what, func() error {
		s := tm.screen()
		if ok(s) {
			return nil
		}
		return fmt.Errorf("the screen shows:\n%s", s)
	})
}

func (tm *tmuxTUI) wait(what string, ok func(string) bool) {
	tm.t.Helper()
	if err := tm.poll(20*time.Second, what, ok); err != nil {
		tm.t.Fatal(err)
	}
}

// press sends a key and waits for its effect. A key typed while the
// terminal is still being set up can be lost, so if nothing happens for a
// while the key is sent again (only keys whose effect is visible and
// which do nothing once it happened).
func (tm *tmuxTUI) press(key, what string, ok func(string) bool) {
	tm.t.Helper()
	for range 3 {
		tm.sendKeys(key)
		if tm.poll(5*time.Second, what, ok) == nil {
			return
		}
	}
	tm.t.Fatalf("after %s, waiting for %s; the screen shows:\n%s", key, what, tm.screen())
}

// waitExit waits for the TUI process to end (its tmux session closes).
func (tm *tmuxTUI) waitExit() {
	tm.t.Helper()
	testutil.Eventually(tm.t, 10*time.Second, 50*time.Millisecond, "the TUI to quit on q", func() error {
		if _, err := tm.tmux("has-session", "-t", "tui"); err != nil {
			return nil
		}
		return fmt.Errorf("the screen shows:\n%s", tm.screen())
	})
}
