package e2e

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// portsFree reports whether every port is free on loopback.
func portsFree(ports ...int) bool {
	for _, p := range ports {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// `flowd dev` comes up, runs the demo workflow to success with its built-in
// workers, and exits cleanly on SIGINT.
func TestFlowdDev(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	base := 0
	for i := 0; i < 50 && base == 0; i++ {
		p := 20000 + rand.IntN(20000)
		if portsFree(p, p+1, p+2, p+1000, p+1001, p+1002) {
			base = p
		}
	}
	dev := exec.Command(flowdBin, "dev", "--dir", dir, "--base-port", fmt.Sprint(base), "--http-base-port", "0", "--concurrency", "4")
	stdout, _ := dev.StdoutPipe()
	dev.Stderr = os.Stderr
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- dev.Wait() }()
	defer func() {
		_ = dev.Process.Kill()
	}()
	addr := ""
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(60 * time.Second)
	for addr == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("flowd dev exited before printing FLOWD_ADDR")
			}
			if v, found := strings.CutPrefix(l, "export FLOWD_ADDR="); found {
				addr = v
			}
		case <-timeout:
			t.Fatal("flowd dev did not come up in 60s")
		}
	}
	sub := exec.Command(flowdBin, "submit", "--wait", "--timeout", "60s", filepath.Join(repoRoot(), "examples", "workflows", "demo.yaml"))
	sub.Env = append(os.Environ(), "FLOWD_ADDR="+addr)
	out, err := sub.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "succeeded") {
		t.Fatalf("demo workflow: %v\n%s", err, out)
	}
	_ = dev.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("flowd dev exit after SIGINT: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("flowd dev did not stop within 30s of SIGINT")
	}
	for i := 1; i <= 3; i++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("n%d.sock", i))); !os.IsNotExist(err) {
			t.Fatalf("socket n%d left behind after a clean stop (%v)", i, err)
		}
	}
}

// `flowd dev` says, when an agent dies, how many are up and whether they
// still make a quorum.
func TestFlowdDevReportsQuorum(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	base := 0
	for i := 0; i < 50 && base == 0; i++ {
		p := 20000 + rand.IntN(20000)
		if portsFree(p, p+1, p+2, p+1000, p+1001, p+1002) {
			base = p
		}
	}
	dev := exec.Command(flowdBin, "dev", "--dir", dir, "--base-port", fmt.Sprint(base), "--http-base-port", "0", "--concurrency", "0")
	stdout, _ := dev.StdoutPipe()
	stderr, _ := dev.StderrPipe()
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- dev.Wait() }()
	defer func() { _ = dev.Process.Kill() }()
	lines := make(chan string, 100)
	for _, r := range []io.Reader{stdout, stderr} {
		go func() {
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
	}
	// await returns the first line with want (and records the pids seen).
	pids := map[string]int{}
	await := func(want string) string {
		t.Helper()
		timeout := time.After(60 * time.Second)
		for {
			select {
			case l := <-lines:
				var id string
				var pid int
				if n, _ := fmt.Sscanf(strings.TrimSpace(l), "%s pid %d", &id, &pid); n == 2 {
					pids[id] = pid
				}
				if strings.Contains(l, want) {
					return l
				}
			case <-timeout:
				t.Fatalf("flowd dev printed no %q in 60s", want)
			}
		}
	}
	await("export FLOWD_ADDR=")
	for i, want := range []string{"agent n1 exited; 2 of 3 agents up: quorum holds", "agent n2 exited; 1 of 3 agents up: no quorum, writes stop"} {
		id := fmt.Sprintf("n%d", i+1)
		if pids[id] == 0 {
			t.Fatalf("no pid printed for %s", id)
		}
		if err := syscall.Kill(pids[id], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		t.Log(await(want))
	}
	_ = dev.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("flowd dev did not stop within 30s of SIGINT")
	}
}
