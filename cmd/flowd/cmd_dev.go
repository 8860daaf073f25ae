package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/daemon"
	"github.com/flowd/flowd/internal/demo"
	"github.com/flowd/flowd/internal/pki"
	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/worker"
)

func init() { commands = append(commands, devCommand) }

var devCommand = &cli.Command{
	Name:  "dev",
	Usage: "run a local three-node cluster with demo workers (echo, sleep, fail, flaky, undo)",
	Description: `Starts three flowd agents as child processes on loopback, in --dir, with
their logs in DIR/nN.log, and runs the built-in demo handlers as a worker.
The agents talk to each other over mutual TLS with a CA and node
certificates made in DIR/tls (kept with --keep; --no-tls for plaintext).
Prints the socket paths and an export FLOWD_ADDR=... line. Ctrl-C stops
everything cleanly: the worker drains, the agents shut down gracefully.

Kill one agent (kill -9 PID) to watch the cluster fail over: the others
carry on, and the count of agents up, whether they still make a quorum
("2 of 3 agents up: quorum holds", "1 of 3 agents up: no quorum, writes
stop") and the command to restart it are printed.`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "dir", Usage: "data directory for the three agents", Value: devDir(), EnvVars: []string{"FLOWD_DEV_DIR"}},
		&cli.IntFlag{Name: "base-port", Usage: "raft port of n1 (n2, n3 follow; forwarding = raft + 1000)", Value: 7001, EnvVars: []string{"FLOWD_DEV_BASE_PORT"}},
		&cli.IntFlag{Name: "nodes", Usage: "number of agents", Value: 3, EnvVars: []string{"FLOWD_DEV_NODES"}},
		&cli.IntFlag{Name: "concurrency", Usage: "demo worker task slots (0 = no demo worker)", Value: 8, EnvVars: []string{"FLOWD_DEV_CONCURRENCY"}},
		&cli.BoolFlag{Name: "keep", Usage: "keep existing data in --dir instead of starting fresh (a fresh start empties --dir only if flowd dev made it)", EnvVars: []string{"FLOWD_DEV_KEEP"}},
		&cli.BoolFlag{Name: "no-tls", Usage: "run raft and forwarding in plaintext (loopback only) instead of mutual TLS with certificates made in DIR/tls", EnvVars: []string{"FLOWD_DEV_NO_TLS"}},
		&cli.IntFlag{Name: "http-base-port", Usage: "HTTP (health, metrics) port of n1 (0 = none)", Value: devHTTPBasePort, EnvVars: []string{"FLOWD_DEV_HTTP_BASE_PORT"}},
		&cli.Float64Flag{Name: "raft-multiplier", Usage: "the agents' --raft-multiplier (higher rides out longer stalls of a busy laptop, lower fails over sooner)", Value: devRaftMultiplier, EnvVars: []string{"FLOWD_RAFT_MULTIPLIER"}},
		&cli.StringFlag{Name: "raft-log-store", Usage: "the agents' --raft-log-store for new data dirs (wal or bolt; --keep reuses each dir's own)", EnvVars: []string{"FLOWD_RAFT_LOG_STORE"}},
	},
	Action: runDev,
}

// devRaftMultiplier is flowd dev's --raft-multiplier: a laptop running
// builds and a browser next to three agents stalls a process for longer
// than a server does (see cluster/raftnode/DESIGN.md, "Timing on a busy machine").
const devRaftMultiplier = 2

type devNode struct {
	id, sock, raft, log string
	cmd                 *exec.Cmd
	exited              chan error
}

func runDev(c *cli.Context) error {
	out, errw := c.App.Writer, c.App.ErrWriter
	dir, _ := filepath.Abs(c.String("dir"))
	n := c.Int("nodes")
	if n < 1 || n > 9 {
		return cli.Exit("--nodes must be between 1 and 9", 2)
	}
	if err := checkDevPorts(c.Int("base-port"), c.Int("http-base-port"), n); err != nil {
		return err
	}
	if err := prepareDevDir(dir, c.Bool("keep")); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	base := c.Int("base-port")
	var peers []string
	nodes := make([]*devNode, n)
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		nodes[i] = &devNode{id: id, sock: filepath.Join(dir, id+".sock"), raft: fmt.Sprintf("127.0.0.1:%d", base+i),
			log: filepath.Join(dir, id+".log"), exited: make(chan error, 1)}
		peers = append(peers, id+"="+nodes[i].raft)
	}
	tlsDir := ""
	if !c.Bool("no-tls") {
		tlsDir = filepath.Join(dir, "tls")
		if err := devCerts(tlsDir, nodes); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for i, nd := range nodes {
		args := []string{"agent", "--node-id", nd.id, "--data-dir", filepath.Join(dir, nd.id), "--raft-addr", nd.raft,
			"--socket", nd.sock, "--peers", strings.Join(peers, ","), "--raft-multiplier", fmt.Sprint(c.Float64("raft-multiplier"))}
		if s := c.String("raft-log-store"); s != "" {
			args = append(args, "--raft-log-store", s)
		}
		if tlsDir != "" {
			ca, _ := pki.CAFiles(tlsDir)
			cert, key := pki.NodeFiles(tlsDir, nd.id)
			args = append(args, "--tls-ca", ca, "--tls-cert", cert, "--tls-key", key)
		}
		if hp := c.Int("http-base-port"); hp > 0 {
			args = append(args, "--http-addr", fmt.Sprintf("127.0.0.1:%d", hp+i))
		}
		logf, err := os.OpenFile(nd.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
		if err != nil {
			return err
		}
		nd.cmd = exec.Command(self, args...)
		nd.cmd.Stdout, nd.cmd.Stderr = logf, logf
		nd.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches us, not them
		if err := nd.cmd.Start(); err != nil {
			stopNodes(nodes, errw)
			return fmt.Errorf("start %s: %w", nd.id, err)
		}
		go func(nd *devNode, f *os.File) { nd.exited <- nd.cmd.Wait(); f.Close() }(nd, logf)
	}
	defer stopNodes(nodes, errw)

	var eps []string
	for _, nd := range nodes {
		eps = append(eps, "unix://"+nd.sock)
	}
	leader, err := waitForLeader(ctx, eps, nodes)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "flowd dev: %d agents up in %s (leader %s)\n", n, dir, leader)
	if tlsDir != "" {
		fmt.Fprintf(out, "  nodes talk mutual TLS; CA and node certificates in %s\n", tlsDir)
	} else {
		fmt.Fprintln(out, "  nodes talk plaintext on loopback (--no-tls)")
	}
	for _, nd := range nodes {
		fmt.Fprintf(out, "  %s  pid %-7d unix://%s  raft %s  log %s\n", nd.id, nd.cmd.Process.Pid, nd.sock, nd.raft, nd.log)
	}
	if hp := c.Int("http-base-port"); hp > 0 {
		fmt.Fprintln(out, devHTTPLine(hp, n))
	}
	fmt.Fprintf(out, "\nexport FLOWD_ADDR=%s\n\n", strings.Join(eps, ","))

	var wk *worker.Worker
	workerDone := make(chan error, 1)
	if conc := c.Int("concurrency"); conc > 0 {
		logger := slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
		wk, err = worker.New(eps, worker.Options{ID: "dev-worker", Concurrency: conc, Logger: logger, ClaimWait: 10 * time.Second})
		if err != nil {
			return err
		}
		demo.Register(wk)
		fmt.Fprintf(out, "demo worker: types %s, %d slots\n", strings.Join(demo.Types, ", "), conc)
		wctx, wcancel := context.WithCancel(context.Background())
		defer wcancel()
		go func() { workerDone <- wk.Run(wctx) }()
		go func() { <-ctx.Done(); wcancel() }()
	}
	me := invokedAs()
	fmt.Fprintf(out, "try:  %s submit --wait examples/workflows/demo.yaml   |   %s tui   |   Ctrl-C stops everything\n", me, me)

	// An agent that dies (say, kill -9 to watch a failover) is reported;
	// the others carry on.
	exits := nodeExits(nodes)
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case nd := <-exits:
			fmt.Fprintf(errw, "agent %s exited; %s.\n"+
				"  restart it: %s\n  log: %s\n", nd.id, quorumLine(liveAgents(eps), n), strings.Join(nd.cmd.Args, " "), nd.log)
		}
	}
	fmt.Fprintln(out, "\nstopping: draining the demo worker, then the agents")
	if wk != nil {
		select {
		case <-workerDone:
		case <-time.After(15 * time.Second):
			wk.Stop()
		}
	}
	return nil
}

// liveAgents counts the agents that answer on their sockets (an agent the
// user restarted by hand counts too).
func liveAgents(eps []string) int {
	c, err := rpc.NewClient(eps, rpc.ClientOptions{DialTimeout: time.Second, Logger: discardLogger})
	if err != nil {
		return 0
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	up := 0
	for _, e := range c.Survey(ctx).Endpoints {
		if e.Err == nil {
			up++
		}
	}
	return up
}

// quorumLine says how many of n agents are up and whether they are a
// majority.
func quorumLine(up, n int) string {
	if up >= n/2+1 {
		line := fmt.Sprintf("%d of %d agents up: quorum holds", up, n)
		if up == n/2+1 {
			line += " (one more down stops writes)"
		}
		return line
	}
	return fmt.Sprintf("%d of %d agents up: no quorum, writes stop until a majority is back (reads still answer, possibly stale)", up, n)
}

// nodeExits reports each agent that exits.
func nodeExits(nodes []*devNode) <-chan *devNode {
	ch := make(chan *devNode, len(nodes))
	for _, nd := range nodes {
		go func(nd *devNode) {
			err := <-nd.exited
			nd.exited <- err // keep it for stopNodes
			ch <- nd
		}(nd)
	}
	return ch
}

// stopNodes sends SIGTERM to every agent and waits (SIGKILL after 10 s).
func stopNodes(nodes []*devNode, errw io.Writer) {
	for _, nd := range nodes {
		if nd != nil && nd.cmd != nil && nd.cmd.Process != nil {
			_ = nd.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, nd := range nodes {
		if nd == nil || nd.cmd == nil || nd.cmd.Process == nil {
			continue
		}
		select {
		case <-nd.exited:
		case <-time.After(10 * time.Second):
			fmt.Fprintf(errw, "%s did not stop in 10s; killing it\n", nd.id)
			_ = nd.cmd.Process.Kill()
			<-nd.exited
		}
	}
}

// waitForLeader polls the agents' status until one reports a leader. (A
// start-up readiness check, not a dispatch path.)
func waitForLeader(ctx context.Context, eps []string, nodes []*devNode) (string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, nd := range nodes {
			select {
			case err := <-nd.exited:
				nd.exited <- err
				b, _ := os.ReadFile(nd.log)
				return "", fmt.Errorf("agent %s exited during start-up (%v):\n%s", nd.id, err, tail(string(b), 20))
			default:
			}
		}
		for _, ep := range eps {
			cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			conn, err := rpc.Dial(cctx, ep, rpc.ConnOptions{})
			if err == nil {
				var st rpc.ClusterStatus
				err = conn.Call(cctx, rpc.MethodClusterStatus, struct{}{}, &st)
				conn.Close()
				if err == nil && st.LeaderID != "" {
					cancel()
					return st.LeaderID, nil
				}
			}
			cancel()
		}
		select {
		case <-ctx.Done():
			return "", errors.New("interrupted while waiting for the cluster")
		case <-time.After(100 * time.Millisecond):
		}
	}
	return "", errors.New("the agents did not elect a leader within 30s; see their logs")
}

// devCerts makes the dev cluster's CA and node certificates in dir, keeping
// any that exist (--keep).
func devCerts(dir string, nodes []*devNode) error {
	if _, _, err := pki.CreateCA(dir, 0); err != nil && !errors.Is(err, pki.ErrExists) {
		return fmt.Errorf("make the dev CA: %w", err)
	}
	for _, nd := range nodes {
		_, _, err := pki.CreateNodeCert(dir, nd.id, dir, pki.NodeCertOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}})
		if err != nil && !errors.Is(err, pki.ErrExists) {
			return fmt.Errorf("make the certificate of %s: %w", nd.id, err)
		}
	}
	return nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// devMarker marks a directory flowd dev made: only such a directory (or
// an empty or missing one) is wiped for a fresh start.
const devMarker = ".flowd-dev"

// prepareDevDir makes dir ready for a dev cluster: kept as it is with
// keep, otherwise emptied — but only if flowd dev made it (its marker is
// there) or it is empty, so `--dir ~` or `--dir .` cannot delete a home or
// working directory.
func prepareDevDir(dir string, keep bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read --dir %s: %w", dir, err)
	}
	_, merr := os.Stat(filepath.Join(dir, devMarker))
	ours := len(entries) == 0 || merr == nil || madeByOldDev(entries)
	switch {
	case keep:
	case !ours:
		return cli.Exit(fmt.Sprintf("refusing to delete %s for a fresh dev cluster: it holds %d entries and flowd dev did not make it (no %s in it); "+
			"pass an empty or new --dir, or --keep to reuse a dev cluster's data", dir, len(entries), devMarker), 2)
	case len(entries) > 0:
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("clean %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if !ours {
		return nil // --keep on a directory flowd dev did not make: never mark it ours
	}
	return os.WriteFile(filepath.Join(dir, devMarker), []byte("made by flowd dev; flowd dev deletes this directory on its next start unless given --keep\n"), 0o640)
}

// madeByOldDev recognizes a directory an earlier flowd dev made (before the
// marker): nothing in it but nN/, nN.log, nN.sock and tls/.
func madeByOldDev(entries []os.DirEntry) bool {
	for _, e := range entries {
		name := e.Name()
		base := strings.TrimSuffix(strings.TrimSuffix(name, ".log"), ".sock")
		node := len(base) == 2 && base[0] == 'n' && base[1] >= '1' && base[1] <= '9'
		if !(node || name == "tls" && e.IsDir()) {
			return false
		}
	}
	return true
}

// invokedAs is how to run this binary again from the same shell: its name
// when it was found on $PATH, else the path it was started by (bin/flowd
// after `make run`), so a copied hint works.
func invokedAs() string {
	arg0 := os.Args[0]
	if !strings.ContainsRune(arg0, filepath.Separator) {
		return arg0
	}
	if p, err := exec.LookPath(filepath.Base(arg0)); err == nil {
		if a, b := absPath(p), absPath(arg0); a == b {
			return filepath.Base(arg0)
		}
	}
	return arg0
}

func absPath(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// checkDevPorts makes sure the ports the agents will take are free before
// any starts, so a clash names the flowd dev flags that move them (an
// agent would say "set --forward-addr", which flowd dev does not take).
type devPort struct {
	what string
	port int
	flag string
}

func checkDevPorts(base, httpBase, n int) error {
	for i := range n {
		ports := []devPort{
			{"raft", base + i, "--base-port"},
			{"forwarding", base + i + daemon.ForwardPortOffset, "--base-port"},
		}
		if httpBase > 0 {
			ports = append(ports, devPort{"HTTP", httpBase + i, "--http-base-port"})
		}
		for _, p := range ports {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p.port))
			if err != nil {
				return failf(fmt.Sprintf("another flowd dev may be running (stop it), or move this one: %s N (raft ports N..N+%d, forwarding +%d) and --http-base-port M",
					p.flag, n-1, daemon.ForwardPortOffset),
					"port %d (the %s port of n%d) is in use: %v", p.port, p.what, i+1, err)
			}
			l.Close()
		}
	}
	return nil
}
