//go:build linux

package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func timerSlackOf(t *testing.T, pid string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/timerslack_ns")
	if err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// The agent runs with --timer-slack (1 ms by default) by re-executing
// itself once at start: the process its supervisor started (same pid) is
// the agent that serves, with the slack set; --timer-slack 0 keeps the
// slack it inherited; an agent started with the slack already set (as a
// service manager's TimerSlackNSec= does) keeps it.
func TestAgentRunsWithItsTimerSlack(t *testing.T) {
	c := startCluster(t, 1)
	a := c.agents[0]
	pid := strconv.Itoa(a.cmd.Process.Pid)
	if got := timerSlackOf(t, pid); got != 1_000_000 {
		t.Fatalf("agent pid %s runs with timer slack %d ns, want the default 1 ms", pid, got)
	}
	if st := c.status(a); st == nil || st.State != "leader" {
		t.Fatalf("the started process does not serve: status %+v", st)
	}
	env, err := os.ReadFile("/proc/" + pid + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(env), "FLOWD_TIMER_SLACK_APPLIED=1") {
		t.Fatalf("agent pid %s was not re-executed (its environment has no marker)", pid)
	}

	// Off: the agent keeps what it inherited and is not re-executed.
	c.stopAll()
	a.args = append(a.args, "--timer-slack", "0")
	c.restart(a)
	c.waitLeader()
	pid = strconv.Itoa(a.cmd.Process.Pid)
	if got, want := timerSlackOf(t, pid), timerSlackOf(t, "self"); got != want {
		t.Fatalf("with --timer-slack 0 the agent runs with %d ns, want the inherited %d", got, want)
	}
	if env, _ := os.ReadFile("/proc/" + pid + "/environ"); strings.Contains(string(env), "FLOWD_TIMER_SLACK_APPLIED") {
		t.Fatal("with --timer-slack 0 the agent re-executed itself")
	}

	// Already set by whoever started it: no re-exec.
	c.stopAll()
	a.args = append(a.args[:len(a.args)-2], "--timer-slack", strconv.FormatInt(timerSlackOf(t, "self"), 10)+"ns")
	c.restart(a)
	c.waitLeader()
	pid = strconv.Itoa(a.cmd.Process.Pid)
	if env, _ := os.ReadFile("/proc/" + pid + "/environ"); strings.Contains(string(env), "FLOWD_TIMER_SLACK_APPLIED") {
		t.Fatal("an agent already running with the slack it was asked for re-executed itself")
	}
}
