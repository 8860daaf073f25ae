package daemon

import (
	"testing"

	gometrics "github.com/armon/go-metrics"
)

// Raft reports several samples per commit: each must cost no allocation.
func BenchmarkRaftSinkSample(b *testing.B) {
	s := newRaftSink()
	key := []string{"flowd", "raft", "replication", "appendEntries", "rpc"}
	labels := []gometrics.Label{{Name: "peer_id", Value: "n2"}}
	b.ReportAllocs()
	for b.Loop() {
		s.AddSampleWithLabels(key, 1.5, labels)
		s.AddSample([]string{"flowd", "raft", "commitTime"}, 2)
	}
}
