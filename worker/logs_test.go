package worker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flowd/flowd/rpc"
)

// The SDK's side of task logs: lines wait until a call carries them, an
// accepted call removes them, a failed one leaves them to be re-sent with
// the same seq, and past the attempt's cap lines are only counted.
func TestTaskLogBuffersSendsAndCaps(t *testing.T) {
	var tk Task
	tk.Log("a", 1)
	tk.Logf("b\nc")
	p, upto := tk.log.take()
	if len(p.Logs) != 3 || *p.LogsSeq != 0 || p.LogsDropped != 0 || upto != 3 || p.Logs[0].Line != "a 1" || p.Logs[2].Line != "c" {
		t.Fatalf("first take %+v upto %d", p, upto)
	}
	// Not acknowledged (outcome unknown): the next call re-sends from 0.
	tk.Log("d")
	p2, upto2 := tk.log.take()
	if len(p2.Logs) != 4 || *p2.LogsSeq != 0 || upto2 != 4 {
		t.Fatalf("re-send %+v", p2)
	}
	tk.log.acked(p2, upto2)
	if p3, _ := tk.log.take(); len(p3.Logs) != 0 || p3.LogsSeq != nil {
		t.Fatalf("after the ack: %+v", p3)
	}

	// A writer splits lines and keeps a partial one until flushed.
	w := tk.LogWriter(rpc.StreamStderr)
	fmt.Fprint(w, "e\nf")
	tk.log.flushWriters()
	p4, upto4 := tk.log.take()
	if len(p4.Logs) != 2 || *p4.LogsSeq != 4 || p4.Logs[1].Line != "f" || p4.Logs[1].Stream != "stderr" {
		t.Fatalf("writer lines %+v", p4)
	}
	tk.log.acked(p4, upto4)

	// Past the cap: nothing more is kept, the count rides as logs_dropped.
	big := strings.Repeat("x", 1000)
	for range 100 {
		tk.Log(big)
	}
	tk.Log("short")
	p5, upto5 := tk.log.take()
	kept := 0
	for _, l := range p5.Logs {
		kept += len(l.Line)
	}
	if kept+6 > rpc.MaxAttemptLogBytes || *p5.LogsSeq != 6 || len(p5.Logs)+p5.LogsDropped != 101 || p5.LogsDropped < 30 {
		t.Fatalf("capped take: %d lines, %d bytes, seq %d, dropped %d", len(p5.Logs), kept, *p5.LogsSeq, p5.LogsDropped)
	}
	tk.log.acked(p5, upto5)
	tk.Log("more")
	if p6, _ := tk.log.take(); len(p6.Logs) != 0 || *p6.LogsSeq != upto5 || p6.LogsDropped != 1 {
		t.Fatalf("after the cap: %+v", p6)
	}
}
