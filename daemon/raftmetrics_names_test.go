package daemon

import (
	"strings"
	"testing"

	gometrics "github.com/armon/go-metrics"
)

// Raft's per-peer metrics are one metric with a peer label, not one name
// per node id (raft also reports them with the id in the key); its
// millisecond gauges are exported in seconds with the unit in the name.
func TestRaftMetricsPeerLabelAndUnits(t *testing.T) {
	s := newRaftSink()
	peer := []gometrics.Label{{Name: "peer_id", Value: "n2"}}
	s.AddSampleWithLabels([]string{"flowd", "raft", "replication", "appendEntries", "rpc"}, 2, peer)
	s.IncrCounterWithLabels([]string{"flowd", "raft", "replication", "appendEntries", "logs"}, 3, peer)
	s.AddSampleWithLabels([]string{"flowd", "raft", "replication", "heartbeat"}, 1, peer)
	// The same samples with the id in the key (raft's legacy telemetry).
	s.AddSample([]string{"flowd", "raft", "replication", "appendEntries", "rpc", "n2"}, 2)
	s.IncrCounter([]string{"flowd", "raft", "replication", "appendEntries", "logs", "n2"}, 3)
	s.AddSample([]string{"flowd", "raft", "replication", "heartbeat", "n2"}, 1)
	s.AddSample([]string{"flowd", "raft", "replication", "installSnapshot", "n2"}, 1)
	s.SetGauge([]string{"flowd", "raft", "leader", "oldestLogAge"}, 1500)
	s.SetGauge([]string{"flowd", "raft", "peers"}, 3)

	fams, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range fams {
		name := f.GetName()
		got[name] = true
		if strings.Contains(name, "n2") {
			t.Errorf("%s: a node id in a metric name", name)
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "peer_id" {
					t.Errorf("%s: label peer_id, want peer", name)
				}
			}
		}
		switch name {
		case "flowd_raft_replication_append_entries_rpc_seconds", "flowd_raft_replication_append_entries_logs_total":
			if m := f.GetMetric(); len(m) != 1 || len(m[0].GetLabel()) != 1 || m[0].GetLabel()[0].GetName() != "peer" || m[0].GetLabel()[0].GetValue() != "n2" {
				t.Errorf("%s: %v, want one series with peer=\"n2\"", name, m)
			}
		case "flowd_raft_leader_oldest_log_age_seconds":
			if v := f.GetMetric()[0].GetGauge().GetValue(); v != 1.5 {
				t.Errorf("%s = %v, want 1.5 (1500 ms)", name, v)
			}
		case "flowd_raft_metrics_dropped_total":
			if v := f.GetMetric()[0].GetCounter().GetValue(); v != 0 {
				t.Errorf("%s = %v: the per-peer duplicates are left out, not dropped", name, v)
			}
		}
	}
	for _, want := range []string{"flowd_raft_replication_append_entries_rpc_seconds", "flowd_raft_replication_append_entries_logs_total",
		"flowd_raft_replication_heartbeat_seconds", "flowd_raft_leader_oldest_log_age_seconds", "flowd_raft_peers"} {
		if !got[want] {
			t.Errorf("no %s", want)
		}
	}
	if got["flowd_raft_leader_oldest_log_age"] {
		t.Error("flowd_raft_leader_oldest_log_age: no unit")
	}
}
