// Command loadgen reproduces a busy machine and measures how a three-agent
// cluster's leadership behaves on it (cluster/raftnode/DESIGN.md, "Timing on a busy
// machine"; docs/operations.md, "Raft timing").
//
//	go run ./internal/loadgen load -cpu 2 -io 3 -dir /var/tmp/lg
//	go run ./internal/loadgen ha -bin bin/flowd -dir /tmp/ha -watch 5m -kill 5 -stop 5
//
// load runs -cpu processes that spin and -io processes that write and fsync
// 64 KiB in a loop (each rewriting a 64 MiB file), and itself sleeps 10 ms
// in a loop, printing every 10 s how late those wake-ups were (how long a
// process on this machine can go unscheduled) and the load average.
//
// ha starts three agents (mutual TLS, as flowd dev runs them), then counts
// elections on a quiet cluster for -watch, then times -kill failovers after
// a kill -9 of the leader and -stop failovers after a SIGSTOP of the leader
// (the leader isolated; it gets SIGCONT once another agent leads), and
// -pause trials that SIGSTOP the leader for -pause-for and report whether
// it lost leadership. -degraded kills a follower first, so -watch sees two
// survivors (no slack: one stall of either ends the leader's lease). -bench
// runs `flowd bench --mode queue` at a steady rate throughout. Agent flags
// after "--" are passed to every agent.
//
// Both run until done or interrupted, and stop every process they started.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loadgen load|ha|spin|fsync [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "load":
		err = runLoad(ctx, os.Args[2:])
	case "ha":
		err = runHA(ctx, os.Args[2:])
	case "spin":
		spin(ctx)
	case "fsync":
		err = fsyncLoop(ctx, os.Args[2])
	default:
		err = fmt.Errorf("unknown command %q: load, ha, spin or fsync", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func runLoad(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	cpu := fs.Int("cpu", 2, "CPU-spinning processes")
	io := fs.Int("io", 2, "processes writing and fsyncing 64 KiB in a loop")
	dir := fs.String("dir", os.TempDir(), "directory of the fsync files (put it on the agents' file system)")
	dur := fs.Duration("for", 0, "stop after this long (0: until interrupted)")
	_ = fs.Parse(args)
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var procs []*exec.Cmd
	var files []string
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
		for _, f := range files {
			_ = os.Remove(f)
		}
	}()
	start := func(args ...string) error {
		c := exec.Command(self, args...)
		c.Stderr = os.Stderr
		c.Env = append(os.Environ(), "GOMAXPROCS=1")
		if err := c.Start(); err != nil {
			return err
		}
		procs = append(procs, c)
		return nil
	}
	for range *cpu {
		if err := start("spin"); err != nil {
			return err
		}
	}
	for i := range *io {
		f := filepath.Join(*dir, fmt.Sprintf("loadgen-%d-%d.dat", os.Getpid(), i))
		files = append(files, f)
		if err := start("fsync", f); err != nil {
			return err
		}
	}
	fmt.Printf("loadgen: %d spinning, %d fsyncing in %s\n", *cpu, *io, *dir)
	probe(ctx, 10*time.Second, func(s probeStats) {
		fmt.Printf("%s load %s  wake-up lateness: p99 %s max %s (%d sleeps of 10ms)\n",
			time.Now().UTC().Format("15:04:05"), loadAvg(), s.p99.Round(time.Millisecond), s.max.Round(time.Millisecond), s.n)
	})
	return nil
}

type probeStats struct {
	n        int
	p99, max time.Duration
}

// probe sleeps 10 ms in a loop and reports, every period, how much later
// than asked the sleeps ended.
func probe(ctx context.Context, period time.Duration, report func(probeStats)) {
	var late []time.Duration
	next := time.Now().Add(period)
	for ctx.Err() == nil {
		t := time.Now()
		time.Sleep(10 * time.Millisecond) // the probe: how late this wakes is what is measured
		late = append(late, time.Since(t)-10*time.Millisecond)
		if time.Now().After(next) {
			slices.Sort(late)
			report(probeStats{n: len(late), p99: late[len(late)*99/100], max: late[len(late)-1]})
			late, next = late[:0], time.Now().Add(period)
		}
	}
}

func spin(ctx context.Context) {
	x := 0
	for ctx.Err() == nil {
		for i := range 1 << 20 {
			x += i
		}
	}
	_ = x
}

// fsyncLoop writes 64 KiB and fsyncs, over and over, wrapping at 64 MiB.
func fsyncLoop(ctx context.Context, path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	var off int64
	for ctx.Err() == nil {
		buf[0]++
		if _, err := f.WriteAt(buf, off); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		if off += int64(len(buf)); off >= 64<<20 {
			off = 0
		}
	}
	return nil
}

// loadAvg is /proc/loadavg's first three fields ("?" where there is none).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func load1() float64 {
	v, _ := strconv.ParseFloat(strings.Fields(loadAvg() + " 0")[0], 64)
	return v
}
