package bench

import (
	"encoding/json"
	"testing"
)

func TestBenchHelpers(t *testing.T) {
	// Fields after the command name: state ppid pgrp session tty tpgid
	// flags minflt cminflt majflt cmajflt utime stime ...
	got, err := procStatTicks("4242 (flowd (x) y) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1\n")
	if err != nil || got != 300 {
		t.Errorf("procStatTicks = %d, %v; want 300", got, err)
	}
	if _, err := procStatTicks("4242 (flowd) S 1 2"); err == nil {
		t.Error("a short stat line parsed")
	}
	for ep, want := range map[string]bool{"unix:///tmp/n1.sock": true, "/tmp/n1.sock": true,
		"tcp://127.0.0.1:7000": true, "tcp://localhost:7000": true, "tcp://[::1]:7000": true, "tcp://10.0.0.5:7000": false} {
		if localEndpoint(ep) != want {
			t.Errorf("localEndpoint(%q) = %v", ep, !want)
		}
	}
	var wf struct {
		Tasks []struct {
			Queue string          `json:"queue"`
			Input json.RawMessage `json:"input"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(queueWorkflow("q1", 12345, 200), &wf); err != nil || len(wf.Tasks) != 1 {
		t.Fatalf("workflow: %v %+v", err, wf)
	}
	if len(wf.Tasks[0].Input) != 200 || wf.Tasks[0].Queue != "q1" || !json.Valid(wf.Tasks[0].Input) {
		t.Errorf("input %d bytes in queue %q: %s", len(wf.Tasks[0].Input), wf.Tasks[0].Queue, wf.Tasks[0].Input)
	}
	l := latencyOf(nil)
	if l != (Latency{}) {
		t.Errorf("latencyOf(nil) = %+v", l)
	}
}
