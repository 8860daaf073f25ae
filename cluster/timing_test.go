package cluster

import (
	"strings"
	"testing"
	"time"
)

func TestRaftTimingMultiplierScalesAndExplicitOverrides(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	def := DefaultRaftMultiplier
	for _, tc := range []struct {
		name string
		in   RaftTiming
		want RaftTiming
	}{
		{"defaults", RaftTiming{}, RaftTiming{Multiplier: def,
			Heartbeat: time.Duration(def * float64(BaseHeartbeatTimeout)), Election: time.Duration(def * float64(BaseElectionTimeout)),
			LeaderLease: time.Duration(def * float64(BaseHeartbeatTimeout))}},
		{"x1", RaftTiming{Multiplier: 1}, RaftTiming{1, ms(500), ms(500), ms(500)}},
		{"x3", RaftTiming{Multiplier: 3}, RaftTiming{3, ms(1500), ms(1500), ms(1500)}},
		{"x1.5", RaftTiming{Multiplier: 1.5}, RaftTiming{1.5, ms(750), ms(750), ms(750)}},
		{"explicit heartbeat wins, lease follows it", RaftTiming{Multiplier: 2, Heartbeat: ms(300)}, RaftTiming{2, ms(300), ms(1000), ms(300)}},
		{"explicit election and lease win", RaftTiming{Multiplier: 2, Election: ms(1500), LeaderLease: ms(400)}, RaftTiming{2, ms(1000), ms(1500), ms(400)}},
		{"defaulted election never below an explicit heartbeat", RaftTiming{Multiplier: 1, Heartbeat: ms(2000)}, RaftTiming{1, ms(2000), ms(2000), ms(2000)}},
	} {
		got := tc.in.Resolve()
		if got != tc.want {
			t.Errorf("%s: %+v resolved to %+v, want %+v", tc.name, tc.in, got, tc.want)
		}
		if p := got.Check("m", "h", "e", "l"); len(p) != 0 {
			t.Errorf("%s: %+v refused: %v", tc.name, got, p)
		}
	}
}

func TestRaftTimingCheckNamesTheSetting(t *testing.T) {
	for _, tc := range []struct {
		in   RaftTiming
		want string
	}{
		{RaftTiming{Multiplier: 0.05}, "m 0.05 must be between"},
		{RaftTiming{Multiplier: 11}, "m 11 must be between"},
		{RaftTiming{Multiplier: 1, LeaderLease: 600 * time.Millisecond}, "l 600ms must not be longer than h 500ms"},
		{RaftTiming{Multiplier: 1, Heartbeat: time.Second, Election: 600 * time.Millisecond}, "e 600ms must not be shorter than h 1s"},
		{RaftTiming{Multiplier: 1, Heartbeat: 2 * time.Millisecond, LeaderLease: time.Millisecond}, "h 2ms is too short"},
	} {
		p := tc.in.Resolve().Check("m", "h", "e", "l")
		if !strings.Contains(strings.Join(p, "; "), tc.want) {
			t.Errorf("%+v: problems %q, want one containing %q", tc.in, p, tc.want)
		}
	}
}
