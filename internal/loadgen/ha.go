package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/flowd/flowd/internal/pki"
	"github.com/flowd/flowd/rpc"
)

type haAgent struct {
	id, dir, sock, raft, http string
	args                      []string
	cmd                       *exec.Cmd
	exited                    chan struct{}
}

type haCluster struct {
	bin    string
	agents []*haAgent
}

func runHA(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ha", flag.ExitOnError)
	bin := fs.String("bin", "bin/flowd", "flowd binary")
	dir := fs.String("dir", "", "data directory (required; emptied first)")
	base := fs.Int("base-port", 27001, "raft port of n1 (n2, n3 follow; forwarding +1000, HTTP +2000)")
	watch := fs.Duration("watch", 0, "count elections on the running cluster for this long")
	kills := fs.Int("kill", 0, "failover trials after a kill -9 of the leader")
	stops := fs.Int("stop", 0, "failover trials after a SIGSTOP of the leader (SIGCONT once another leads)")
	pauses := fs.Int("pause", 0, "trials that SIGSTOP the leader for -pause-for and check it keeps leading")
	pauseFor := fs.Duration("pause-for", 500*time.Millisecond, "how long a -pause trial stops the leader")
	bench := fs.Float64("bench", 0, "run `flowd bench --mode queue` at this many jobs/s throughout (0: none)")
	benchWorkers := fs.Int("bench-workers", 64, "workers of -bench")
	degraded := fs.Bool("degraded", false, "kill -9 one follower before -watch: two survivors, no slack")
	_ = fs.Parse(args)
	if *dir == "" {
		return errors.New("-dir is required")
	}
	_ = os.RemoveAll(*dir)
	c, err := startHA(ctx, *bin, *dir, *base, fs.Args())
	if err != nil {
		return err
	}
	defer c.stop()
	if _, _, err := c.waitStable(ctx, 30*time.Second); err != nil {
		return err
	}
	if *bench > 0 {
		stopBench := c.runBench(ctx, *dir, *bench, *benchWorkers)
		defer stopBench()
	}
	if *degraded {
		if err := c.killFollower(ctx); err != nil {
			return err
		}
	}
	if *watch > 0 {
		c.watch(ctx, *watch)
	}
	if *kills > 0 {
		c.trials(ctx, "kill -9", *kills, syscall.SIGKILL)
	}
	if *stops > 0 {
		c.trials(ctx, "SIGSTOP", *stops, syscall.SIGSTOP)
	}
	if *pauses > 0 {
		c.pauseTrials(ctx, *pauses, *pauseFor)
	}
	return ctx.Err()
}

func startHA(ctx context.Context, bin, dir string, base int, extra []string) (*haCluster, error) {
	tlsDir := filepath.Join(dir, "tls")
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		return nil, err
	}
	if _, _, err := pki.CreateCA(tlsDir, 0); err != nil {
		return nil, err
	}
	c := &haCluster{bin: bin}
	var peers []string
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		if _, _, err := pki.CreateNodeCert(tlsDir, id, tlsDir, pki.NodeCertOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}); err != nil {
			return nil, err
		}
		a := &haAgent{id: id, dir: filepath.Join(dir, id), sock: filepath.Join(dir, id+".sock"),
			raft: fmt.Sprintf("127.0.0.1:%d", base+i), http: fmt.Sprintf("127.0.0.1:%d", base+2000+i)}
		peers = append(peers, id+"="+a.raft)
		c.agents = append(c.agents, a)
	}
	ca, _ := pki.CAFiles(tlsDir)
	for _, a := range c.agents {
		cert, key := pki.NodeFiles(tlsDir, a.id)
		a.args = append([]string{"agent", "--node-id", a.id, "--data-dir", a.dir, "--raft-addr", a.raft,
			"--socket", a.sock, "--http-addr", a.http, "--peers", strings.Join(peers, ","),
			"--tls-ca", ca, "--tls-cert", cert, "--tls-key", key}, extra...)
		if err := c.start(a); err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

func (c *haCluster) start(a *haAgent) error {
	f, err := os.OpenFile(a.dir+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	a.cmd = exec.Command(c.bin, a.args...)
	a.cmd.Stdout, a.cmd.Stderr = f, f
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := a.cmd.Start(); err != nil {
		f.Close()
		return err
	}
	a.exited = make(chan struct{})
	go func() { _ = a.cmd.Wait(); f.Close(); close(a.exited) }()
	return nil
}

func (c *haCluster) stop() {
	for _, a := range c.agents {
		if a.cmd != nil && a.cmd.Process != nil {
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
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
	}
}

// status asks one agent for cluster.status (nil if it does not answer
// within 300 ms).
func status(a *haAgent) *rpc.ClusterStatus {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
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

// waitStable waits until every agent answers and names the same leader,
// which reports itself leader, for 1 s in a row; it returns that leader
// and its term.
func (c *haCluster) waitStable(ctx context.Context, limit time.Duration) (*haAgent, uint64, error) {
	deadline := time.Now().Add(limit)
	var since time.Time
	var last string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		leader, term := c.agreed()
		switch {
		case leader == nil:
			since, last = time.Time{}, ""
		case leader.id != last:
			since, last = time.Now(), leader.id
		case time.Since(since) >= time.Second:
			return leader, term, nil
		}
		time.Sleep(50 * time.Millisecond) // polling other processes
	}
	return nil, 0, fmt.Errorf("no stable leader within %s", limit)
}

// agreed returns the leader all agents name, if they agree.
func (c *haCluster) agreed() (*haAgent, uint64) {
	var leader *haAgent
	var term uint64
	for _, a := range c.agents {
		st := status(a)
		if st == nil || st.LeaderID == "" || (leader != nil && leader.id != st.LeaderID) {
			return nil, 0
		}
		for _, b := range c.agents {
			if b.id == st.LeaderID {
				leader = b
			}
		}
		if st.State == "leader" {
			term = st.Term
		}
	}
	if term == 0 {
		return nil, 0
	}
	return leader, term
}

// killFollower kill -9s a follower of the stable leader and leaves it
// down; the rest of the run sees only the two survivors.
func (c *haCluster) killFollower(ctx context.Context) error {
	leader, _, err := c.waitStable(ctx, 60*time.Second)
	if err != nil {
		return err
	}
	for i, a := range c.agents {
		if a != leader {
			_ = a.cmd.Process.Kill()
			<-a.exited
			c.agents = append(c.agents[:i:i], c.agents[i+1:]...)
			fmt.Printf("%s killed follower %s; watching %d agents\n", now(), a.id, len(c.agents))
			return nil
		}
	}
	return errors.New("no follower")
}

// watch counts term and leader changes seen by any agent.
func (c *haCluster) watch(ctx context.Context, d time.Duration) {
	fmt.Printf("%s watch %s: load %s\n", now(), d, loadAvg())
	end := time.Now().Add(d)
	var maxTerm uint64
	var leader string
	terms, leaders := 0, 0
	var loads []float64
	nextLoad := time.Now()
	for time.Now().Before(end) && ctx.Err() == nil {
		for _, a := range c.agents {
			st := status(a)
			if st == nil {
				continue
			}
			if maxTerm != 0 && st.Term > maxTerm {
				terms += int(st.Term - maxTerm)
				fmt.Printf("%s term %d -> %d (seen by %s, state %s, leader %q)\n", now(), maxTerm, st.Term, a.id, st.State, st.LeaderID)
			}
			maxTerm = max(maxTerm, st.Term)
			if st.State == "leader" && st.LeaderID != leader {
				if leader != "" {
					leaders++
					fmt.Printf("%s leader %s -> %s\n", now(), leader, st.LeaderID)
				}
				leader = st.LeaderID
			}
		}
		if time.Now().After(nextLoad) {
			loads = append(loads, load1())
			nextLoad = time.Now().Add(10 * time.Second)
		}
		time.Sleep(100 * time.Millisecond) // polling other processes
	}
	slices.Sort(loads)
	fmt.Printf("RESULT watch %s: %d term changes, %d leader changes; load1 min %.2f median %.2f max %.2f\n",
		d, terms, leaders, loads[0], loads[len(loads)/2], loads[len(loads)-1])
}

// trials times n failovers after sig (SIGKILL or SIGSTOP) to the leader:
// from the signal to another agent reporting itself leader.
func (c *haCluster) trials(ctx context.Context, name string, n int, sig syscall.Signal) {
	var got []time.Duration
	failed := 0
	for i := 0; i < n && ctx.Err() == nil; i++ {
		leader, term, err := c.waitStable(ctx, 60*time.Second)
		if err != nil {
			fmt.Println("trial:", err)
			failed++
			continue
		}
		t0 := time.Now()
		_ = leader.cmd.Process.Signal(sig)
		if sig == syscall.SIGKILL {
			<-leader.exited
		}
		took, ok := c.waitNewLeader(t0, leader, term, 30*time.Second)
		if ok {
			got = append(got, took)
		} else {
			failed++
		}
		fmt.Printf("%s %s of %s (term %d): new leader after %s (ok %v), load %s\n", now(), name, leader.id, term, took.Round(time.Millisecond), ok, loadAvg())
		if sig == syscall.SIGKILL {
			if err := c.start(leader); err != nil {
				fmt.Println("restart:", err)
			}
		} else {
			_ = leader.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	slices.Sort(got)
	if len(got) == 0 {
		fmt.Printf("RESULT %s: no failover measured (%d failed)\n", name, failed)
		return
	}
	fmt.Printf("RESULT %s: n %d p50 %s max %s min %s failed %d all %v\n", name, len(got),
		got[len(got)/2].Round(time.Millisecond), got[len(got)-1].Round(time.Millisecond), got[0].Round(time.Millisecond), failed, rounded(got))
}

// waitNewLeader polls the agents other than old until one reports itself
// leader in a term after term, and returns the time since t0.
func (c *haCluster) waitNewLeader(t0 time.Time, old *haAgent, term uint64, limit time.Duration) (time.Duration, bool) {
	for time.Since(t0) < limit {
		for _, a := range c.agents {
			if a == old {
				continue
			}
			if st := status(a); st != nil && st.State == "leader" && st.Term > term {
				return time.Since(t0), true
			}
		}
		time.Sleep(10 * time.Millisecond) // polling other processes
	}
	return time.Since(t0), false
}

// pauseTrials stops the leader for d, continues it, and reports whether
// the cluster still has it as leader in the same term 3 s later.
func (c *haCluster) pauseTrials(ctx context.Context, n int, d time.Duration) {
	kept := 0
	for i := 0; i < n && ctx.Err() == nil; i++ {
		leader, term, err := c.waitStable(ctx, 60*time.Second)
		if err != nil {
			fmt.Println("pause trial:", err)
			continue
		}
		_ = leader.cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(d) // the fault: the leader's process descheduled for d
		_ = leader.cmd.Process.Signal(syscall.SIGCONT)
		ok := true
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			for _, a := range c.agents {
				if st := status(a); st != nil && (st.Term != term || (st.LeaderID != "" && st.LeaderID != leader.id)) {
					ok = false
				}
			}
			time.Sleep(50 * time.Millisecond) // polling other processes
		}
		if ok {
			kept++
		}
		fmt.Printf("%s SIGSTOP %s for %s: kept leadership %v, load %s\n", now(), leader.id, d, ok, loadAvg())
	}
	fmt.Printf("RESULT pause %s: leader kept %d of %d\n", d, kept, n)
}

// runBench keeps `flowd bench --mode queue` running at rate jobs/s.
func (c *haCluster) runBench(ctx context.Context, dir string, rate float64, workers int) func() {
	var eps []string
	for _, a := range c.agents {
		eps = append(eps, "unix://"+a.sock)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		log, _ := os.OpenFile(filepath.Join(dir, "bench.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		defer log.Close()
		for ctx.Err() == nil {
			cmd := exec.CommandContext(ctx, c.bin, "bench", "--mode", "queue", "--rate", fmt.Sprint(rate),
				"--jobs", fmt.Sprint(int(rate*600)), "--workers", fmt.Sprint(workers), "--producers", "8")
			cmd.Env = append(os.Environ(), "FLOWD_ADDR="+strings.Join(eps, ","))
			cmd.Stdout, cmd.Stderr = log, log
			_ = cmd.Run()
			select {
			case <-ctx.Done():
			case <-time.After(time.Second): // pause before starting the load again
			}
		}
	}()
	return func() { cancel(); <-done }
}

func rounded(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

func now() string { return time.Now().UTC().Format("15:04:05") }
