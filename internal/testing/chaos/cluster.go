package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flowd/flowd/rpc"
)

// Agent is one flowd agent process inside namespace fdc-nI.
type Agent struct {
	I        int
	ID       string
	Dir      string // data dir
	Sock     string // client socket (a file: reachable from the host)
	LogPath  string
	RaftBind string // inside the namespace
	FwdBind  string
	RaftProx *Proxy // what other nodes dial for raft
	FwdProx  *Proxy // ... and for forwarding
	Env      []string
	// Bin, when set, is the binary this agent runs instead of the
	// cluster's (a rolling upgrade in progress).
	Bin string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	logf    *os.File
	stopped bool // SIGSTOPped
}

// Running reports whether the process is alive (possibly stopped).
func (a *Agent) Running() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.exited == nil {
		return false
	}
	select {
	case <-a.exited:
		return false
	default:
		return true
	}
}

// Cluster is the agents, their proxies and the network.
type Cluster struct {
	log    *slog.Logger
	bin    string
	base   string
	Net    *Net
	Faults *Faults

	mu       sync.Mutex
	agents   map[int]*Agent // every agent ever created
	members  []int          // the raft configuration as the test set it
	peers    string         // --peers of the initial configuration
	flags    []string       // extra agent flags
	insecure bool           // the agent has --insecure-plaintext
}

// ClusterOptions configure NewCluster.
type ClusterOptions struct {
	Bin     string
	BaseDir string
	N       int      // initial voters (3)
	Spare   int      // extra namespaces for nodes added later
	Env     []string // extra environment of every agent
	Flags   []string // extra agent flags
}

// NewCluster creates the network, one proxy pair per node, and starts the
// initial N agents. Close stops everything.
func NewCluster(log *slog.Logger, o ClusterOptions) (*Cluster, error) {
	nw, err := NewNet(log, o.N+o.Spare)
	if err != nil {
		return nil, err
	}
	c := &Cluster{log: log, bin: o.Bin, base: o.BaseDir, Net: nw, Faults: NewFaults(), agents: map[int]*Agent{}}
	// Agents that refuse plaintext on non-loopback addresses take
	// --insecure-plaintext; older ones have no such flag.
	if help, _ := exec.Command(o.Bin, "agent", "--help").CombinedOutput(); strings.Contains(string(help), "--insecure-plaintext") {
		c.insecure = true
	}
	var peers []string
	for i := 1; i <= o.N+o.Spare; i++ {
		a, err := c.newAgent(i, o)
		if err != nil {
			c.Close()
			return nil, err
		}
		if i <= o.N {
			peers = append(peers, a.ID+"="+a.RaftProx.Addr())
			c.members = append(c.members, i)
		}
	}
	c.peers = strings.Join(peers, ",")
	if err := nw.apply(); err != nil {
		c.Close()
		return nil, err
	}
	for _, i := range c.members {
		if err := c.Start(c.agents[i]); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) newAgent(i int, o ClusterOptions) (*Agent, error) {
	a := &Agent{I: i, ID: fmt.Sprintf("n%d", i), Dir: filepath.Join(o.BaseDir, fmt.Sprintf("n%d", i)),
		Sock: filepath.Join(o.BaseDir, fmt.Sprintf("n%d.sock", i)), LogPath: filepath.Join(o.BaseDir, fmt.Sprintf("n%d.log", i)),
		RaftBind: nodeIP(i) + ":7001", FwdBind: nodeIP(i) + ":8001"}
	var err error
	if a.RaftProx, err = NewProxy(c.log, i, a.RaftBind, c.Faults); err != nil {
		return nil, err
	}
	if a.FwdProx, err = NewProxy(c.log, i, a.FwdBind, c.Faults); err != nil {
		return nil, err
	}
	c.Net.SetProxyPorts(i, a.RaftProx.Port(), a.FwdProx.Port())
	a.Env = o.Env
	c.mu.Lock()
	c.agents[i] = a
	c.mu.Unlock()
	c.flags = o.Flags
	return a, nil
}

// Agent returns node i.
func (c *Cluster) Agent(i int) *Agent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.agents[i]
}

// SetBin makes bin the binary every agent runs from its next start (a
// finished rolling upgrade; agents started later, new members included).
func (c *Cluster) SetBin(bin string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bin = bin
}

// Members returns the agents of the current configuration.
func (c *Cluster) Members() []*Agent {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Agent
	for _, i := range c.members {
		out = append(out, c.agents[i])
	}
	return out
}

// SetMembers records the configuration the test changed to.
func (c *Cluster) SetMembers(ids []int) {
	c.mu.Lock()
	c.members = append([]int(nil), ids...)
	c.mu.Unlock()
}

func (c *Cluster) args(a *Agent, peers string) []string {
	c.mu.Lock()
	bin := c.bin
	c.mu.Unlock()
	if a.Bin != "" {
		bin = a.Bin
	}
	args := []string{"netns", "exec", nsName(a.I), bin, "agent", "--node-id", a.ID, "--data-dir", a.Dir,
		"--raft-addr", a.RaftBind, "--raft-advertise", a.RaftProx.Addr(),
		"--forward-addr", a.FwdBind, "--forward-advertise", a.FwdProx.Addr(),
		"--socket", a.Sock, "--peers", peers, "--log-level", "info"}
	if c.insecure {
		args = append(args, "--insecure-plaintext") // node traffic on the test bridge, no TLS
	}
	return append(args, c.flags...)
}

// Start starts (or restarts, same flags and data dir) an agent.
func (c *Cluster) Start(a *Agent) error { return c.startWith(a, c.peers, nil) }

// StartJoining starts an agent whose --peers is the initial
// configuration plus itself (how docs/operations.md adds a node).
func (c *Cluster) StartJoining(a *Agent) error {
	return c.startWith(a, c.peers+","+a.ID+"="+a.RaftProx.Addr(), nil)
}

// StartEnv restarts an agent with extra environment (e.g. a clock offset).
func (c *Cluster) StartEnv(a *Agent, env []string) error { return c.startWith(a, c.peers, env) }

func (c *Cluster) startWith(a *Agent, peers string, env []string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.OpenFile(a.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== chaos: start %s at %s env=%v\n", a.ID, time.Now().Format(time.RFC3339Nano), env)
	cmd := exec.Command("ip", c.args(a, peers)...) // ip netns exec execs the agent: same pid
	cmd.Env = append(append(os.Environ(), a.Env...), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	a.cmd, a.logf, a.stopped = cmd, f, false
	exited := make(chan struct{})
	a.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	return nil
}

func (a *Agent) signal(sig syscall.Signal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	_ = a.cmd.Process.Signal(sig)
	switch sig {
	case syscall.SIGSTOP:
		a.stopped = true
	case syscall.SIGCONT:
		a.stopped = false
	}
}

// Kill9 kills the agent (SIGKILL) and waits for it to exit.
func (c *Cluster) Kill9(a *Agent) {
	a.signal(syscall.SIGKILL)
	c.wait(a, 10*time.Second)
}

// Term stops the agent gracefully (SIGTERM), killing it after timeout.
func (c *Cluster) Term(a *Agent, timeout time.Duration) {
	a.signal(syscall.SIGCONT)
	a.signal(syscall.SIGTERM)
	if !c.wait(a, timeout) {
		c.Kill9(a)
	}
}

func (c *Cluster) wait(a *Agent, timeout time.Duration) bool {
	a.mu.Lock()
	ex, f := a.exited, a.logf
	a.mu.Unlock()
	if ex == nil {
		return true
	}
	select {
	case <-ex:
		if f != nil {
			f.Close()
		}
		return true
	case <-time.After(timeout):
		return false
	}
}

// Stop freezes the agent (SIGSTOP); Cont resumes it.
func (c *Cluster) Stop(a *Agent) { a.signal(syscall.SIGSTOP) }

// Cont resumes a stopped agent.
func (c *Cluster) Cont(a *Agent) { a.signal(syscall.SIGCONT) }

// Close stops every agent and proxy and removes the network.
func (c *Cluster) Close() {
	c.mu.Lock()
	var all []*Agent
	for _, a := range c.agents {
		all = append(all, a)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, a := range all {
		wg.Add(1)
		go func() { defer wg.Done(); c.Term(a, 5*time.Second) }()
	}
	wg.Wait()
	for _, a := range all {
		if a.RaftProx != nil {
			a.RaftProx.Close()
		}
		if a.FwdProx != nil {
			a.FwdProx.Close()
		}
	}
	c.Net.Close()
}

// Status asks one agent for cluster.status (nil if it does not answer
// within timeout).
func Status(a *Agent, timeout time.Duration) *rpc.ClusterStatus {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := rpc.Dial(ctx, "unix://"+a.Sock, rpc.ConnOptions{})
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

// call makes one call on a fresh connection to a.
func call(a *Agent, timeout time.Duration, method string, params, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := rpc.Dial(ctx, "unix://"+a.Sock, rpc.ConnOptions{})
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Call(ctx, method, params, result)
}

// Leader returns the member that reports itself leader with the highest
// term among those that answer, or nil.
func (c *Cluster) Leader(among ...*Agent) *Agent {
	if len(among) == 0 {
		among = c.Members()
	}
	var best *Agent
	var term uint64
	for _, a := range among {
		if st := Status(a, 500*time.Millisecond); st != nil && st.State == "leader" && st.Term >= term {
			best, term = a, st.Term
		}
	}
	return best
}

// WaitLeader polls until one of among (default: the members) leads and
// another agrees, or the deadline passes (nil).
func (c *Cluster) WaitLeader(timeout time.Duration, among ...*Agent) *Agent {
	if len(among) == 0 {
		among = c.Members()
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if l := c.Leader(among...); l != nil {
			agree := 0
			for _, a := range among {
				if st := Status(a, 300*time.Millisecond); st != nil && st.LeaderID == l.ID {
					agree++
				}
			}
			if agree*2 > len(among) {
				return l
			}
		}
		time.Sleep(50 * time.Millisecond) // polling external processes
	}
	return nil
}

// WaitHealthy waits until every member answers, agrees on one leader, and
// has applied within lag of the leader's commit index. It returns the
// members that did not get there.
func (c *Cluster) WaitHealthy(timeout time.Duration, lag uint64) []*Agent {
	deadline := time.Now().Add(timeout)
	for {
		var bad []*Agent
		l := c.Leader()
		var commit uint64
		if l != nil {
			if st := Status(l, 500*time.Millisecond); st != nil {
				commit = st.CommitIndex
			}
		}
		for _, a := range c.Members() {
			st := Status(a, 500*time.Millisecond)
			if l == nil || st == nil || st.LeaderID != l.ID || st.AppliedIndex+lag < commit {
				bad = append(bad, a)
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			return bad
		}
		time.Sleep(100 * time.Millisecond) // polling external processes
	}
}

// Tail returns the last n lines of an agent's log.
func (a *Agent) Tail(n int) string {
	b, _ := os.ReadFile(a.LogPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
