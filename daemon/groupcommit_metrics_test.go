package daemon

import "testing"

// The group commit's totals reach /metrics: after two submits, a
// completion and a failure went through the leader, it counts at least
// those commands, in no more entries than commands, and their round trip.
func TestGroupCommitOnMetrics(t *testing.T) {
	a, url := startHTTPAgent(t)
	runTasks(t, a)
	fams := scrape(t, url)
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		m := series(fams, name, labels)
		if m == nil || m.GetCounter() == nil {
			t.Fatalf("no counter %s%v on /metrics", name, labels)
		}
		return m.GetCounter().GetValue()
	}
	entries := value("flowd_group_commit_entries_total", nil)
	commands := value("flowd_group_commit_commands_total", nil)
	if commands < 4 || entries < 1 || entries > commands {
		t.Fatalf("group commit counted %v commands in %v entries, want at least 4 commands in 1..commands entries", commands, entries)
	}
	if s := value("flowd_group_commit_propose_seconds_total", nil); s <= 0 {
		t.Fatalf("propose time %v s after %v entries, want > 0", s, entries)
	}
	filled := value("flowd_group_commit_lingers_total", map[string]string{"outcome": "filled"})
	bound := value("flowd_group_commit_lingers_total", map[string]string{"outcome": "bound"})
	if linger := value("flowd_group_commit_linger_seconds_total", nil); (filled+bound > 0) != (linger > 0) {
		t.Fatalf("%v lingers (%v filled) took %v s", filled+bound, filled, linger)
	}
}
