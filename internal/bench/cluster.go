package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// What the bench reads of the cluster around a run: cluster.status (commit
// index, pids), the agents' CPU time from /proc, and the runs' final states.

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat
// (sysconf(_SC_CLK_TCK), 100 on Linux).
const clockTicks = 100

// VerifyError says that some of the bench's runs did not succeed; the
// report is still worth printing.
type VerifyError struct{ msg string }

func (e *VerifyError) Error() string { return e.msg }

// epStatus is one endpoint's cluster.status (nil when it did not answer).
type epStatus struct {
	ep string
	st *rpc.ClusterStatus
}

// clusterStatuses asks every endpoint for cluster.status.
func clusterStatuses(ctx context.Context, eps []string, opts rpc.ClientOptions) []epStatus {
	out := make([]epStatus, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		out[i].ep = ep
		go func() {
			defer wg.Done()
			o := opts
			o.MaxAttempts = 2
			cl, err := rpc.NewClient([]string{ep}, o)
			if err != nil {
				return
			}
			defer cl.Close()
			sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			if st, err := cl.ClusterStatus(sctx); err == nil {
				out[i].st = st
			}
		}()
	}
	wg.Wait()
	return out
}

// leaderCommit is the leader's commit index, or the highest one seen when
// the leader is not among the endpoints.
func leaderCommit(sts []epStatus) (idx uint64, leader string, ok bool) {
	for _, s := range sts {
		if s.st != nil && s.st.LeaderID != "" && s.st.NodeID == s.st.LeaderID {
			return s.st.CommitIndex, s.st.NodeID, true
		}
	}
	for _, s := range sts {
		if s.st != nil {
			idx, ok = max(idx, s.st.CommitIndex), true
		}
	}
	return idx, "", ok
}

// agentPIDs are the agents' pids: the spawned ones, or those cluster.status
// reports through local endpoints (a remote agent's pid means nothing here).
func agentPIDs(spawned []int, sts []epStatus) ([]int, string) {
	if len(spawned) > 0 {
		return spawned, ""
	}
	var pids []int
	remote, peers := false, 0
	for _, s := range sts {
		if s.st != nil {
			peers = max(peers, len(s.st.Peers))
		}
		if s.st == nil || s.st.PID <= 0 {
			continue
		}
		if !localEndpoint(s.ep) {
			remote = true
			continue
		}
		if !slices.Contains(pids, s.st.PID) {
			pids = append(pids, s.st.PID)
		}
	}
	sort.Ints(pids)
	switch {
	case slices.Contains(pids, os.Getpid()):
		return pids, "the agents run in this process: the CPU includes the bench's own"
	case len(pids) > 0 && len(pids) < peers:
		return pids, fmt.Sprintf("%d of %d agents only: give every agent's endpoint in --addr", len(pids), peers)
	case len(pids) > 0:
		return pids, ""
	case remote:
		return nil, "the agents are not on this machine"
	}
	return nil, "the agents did not report their pid (cluster.status has no pid field)"
}

// localEndpoint: a Unix socket, or TCP to a loopback address.
func localEndpoint(ep string) bool {
	hostport, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return true // unix:///path or a bare path
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// cpuTicks sums utime+stime of pids, in clock ticks.
func cpuTicks(pids []int) (uint64, error) {
	var sum uint64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0, fmt.Errorf("cannot read the CPU time of pid %d: %v", pid, err)
		}
		t, err := procStatTicks(string(b))
		if err != nil {
			return 0, fmt.Errorf("pid %d: %v", pid, err)
		}
		sum += t
	}
	return sum, nil
}

// procStatTicks is utime+stime (fields 14 and 15) of a /proc/PID/stat line.
// The command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so fields are counted after the last ')'.
func procStatTicks(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("malformed /proc stat: %v", err)
	}
	return utime + stime, nil
}

// VerifyRuns checks that every run in ids succeeded, paging run.list
// (consistent, newest first) down to the oldest of ids: they are UUIDv7s
// made during the bench, so runs older than them are not read.
func VerifyRuns(ctx context.Context, eps []string, opts rpc.ClientOptions, callTO time.Duration, ids []string, succeeded *int) error {
	want := make(map[string]bool, len(ids))
	oldest := ""
	for _, id := range ids {
		want[id] = true
		if oldest == "" || id < oldest {
			oldest = id
		}
	}
	cl, err := rpc.NewClient(eps, opts)
	if err != nil {
		return err
	}
	defer cl.Close()
	others := map[domain.RunState]int{}
	var example string
	seen := 0
	cursor := ""
	for {
		lctx, cancel := context.WithTimeout(ctx, callTO)
		res, err := cl.RunList(lctx, rpc.ListParams{Limit: 1000, Cursor: cursor, Consistent: true})
		cancel()
		if err != nil {
			return fmt.Errorf("verify: run.list: %w", err)
		}
		for _, r := range res.Runs {
			if !want[r.ID] {
				continue
			}
			seen++
			if r.State == domain.RunSucceeded {
				*succeeded++
				continue
			}
			others[r.State]++
			if example == "" {
				example = fmt.Sprintf("run %s is %s", r.ID, r.State)
			}
		}
		if res.NextCursor == "" || res.NextCursor < oldest {
			break
		}
		cursor = res.NextCursor
	}
	if *succeeded == len(ids) {
		return nil
	}
	var parts []string
	for st, k := range others {
		parts = append(parts, fmt.Sprintf("%d %s", k, st))
	}
	sort.Strings(parts)
	if missing := len(ids) - seen; missing > 0 {
		parts = append(parts, fmt.Sprintf("%d not found", missing))
		if example == "" {
			for _, id := range ids {
				if want[id] {
					example = "e.g. run " + id + " may be missing"
					break
				}
			}
		}
	}
	return &VerifyError{msg: fmt.Sprintf("verify: %d of %d runs did not succeed (%s); %s",
		len(ids)-*succeeded, len(ids), strings.Join(parts, ", "), example)}
}
