//go:build linux

package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The agent's timer slack (prctl PR_SET_TIMERSLACK): how late the kernel
// may wake a thread from a timed sleep, so that wake-ups due close
// together are served by one (Linux's default is 50 µs).
//
// Why: the Go runtime's monitor thread (sysmon) sleeps in 20 µs steps
// while any goroutine runs and returns to 20 µs whenever it takes a
// processor back from a blocking system call, which the raft log's two
// fdatasyncs per append cause on every entry; its period is hard-coded
// (golang/go#18236). On the 2-vCPU VMs we measure on a context switch is
// an agent's largest single cost (perf, W=64: 23% of a follower's CPU in
// finish_task_switch, half of it under sysmon's nanosleeps). With 1 ms of
// slack those sleeps merge into about one wake-up per millisecond. Go's
// timers already fire on millisecond boundaries (the network poller waits
// in whole milliseconds), so none of flowd's gets coarser by more than
// about 1 ms. Measurements: docs/operations.md, "CPU: timer slack".
//
// The slack is per thread, inherited by the threads a thread creates and
// kept across execve, and the runtime starts sysmon before any of our code
// runs, so setting it in-process would miss the threads that matter. The
// agent sets it on its own thread and re-executes itself once (same pid,
// arguments and environment) before it opens anything; every thread of
// the new image inherits it. A service manager can set it instead
// (systemd: TimerSlackNSec=), and then nothing is re-executed.

// reexecMarker is set in the environment of the re-executed agent, so a
// kernel that does not report back the slack asked for cannot make the
// agent re-execute itself forever.
const reexecMarker = "FLOWD_TIMER_SLACK_APPLIED"

// processTimerSlack reads the slack of the process's main thread, which
// every thread created after start inherited.
func processTimerSlack() (time.Duration, error) {
	b, err := os.ReadFile("/proc/self/timerslack_ns")
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read /proc/self/timerslack_ns: %w", err)
	}
	return time.Duration(ns), nil
}

// ensureTimerSlack re-executes the agent with the timer slack set when its
// threads run with another one. It returns only if nothing was to be done
// or the re-exec failed (the agent then runs with the slack it has);
// slack <= 0 leaves the inherited slack alone.
func ensureTimerSlack(slack time.Duration) error {
	if slack <= 0 {
		return nil
	}
	if _, again := os.LookupEnv(reexecMarker); again {
		os.Unsetenv(reexecMarker)
		return nil
	}
	cur, err := processTimerSlack()
	if err != nil {
		return err
	}
	if cur == slack {
		return nil
	}
	// The new image's first thread is the one that calls execve: set the
	// slack on exactly that thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, syscall.PR_SET_TIMERSLACK, uintptr(slack), 0, 0, 0, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_TIMERSLACK): %w", errno)
	}
	env := append(os.Environ(), reexecMarker+"=1")
	err = syscall.Exec("/proc/self/exe", os.Args, env)
	// Still here: put this thread back as it was (it returns to the pool).
	_, _, _ = syscall.RawSyscall6(syscall.SYS_PRCTL, syscall.PR_SET_TIMERSLACK, uintptr(cur), 0, 0, 0, 0)
	return fmt.Errorf("re-execute with the timer slack set: %w", err)
}
