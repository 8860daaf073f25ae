package raft

import (
	"errors"
	"testing"
)

// flowd patch: Await returns the future's answer, gives up when either
// cancel channel closes without consuming the answer (Error still gets
// it), and returns ErrRaftShutdown when raft shuts down.
func TestDeferErrorAwait(t *testing.T) {
	var d deferError
	d.init()
	cancel := make(chan struct{})
	close(cancel)
	if err, ok := d.Await(cancel, nil); ok || err != nil {
		t.Fatalf("cancelled: %v %v, want nil false", err, ok)
	}
	if err, ok := d.Await(nil, cancel); ok || err != nil {
		t.Fatalf("cancelled by the second channel: %v %v, want nil false", err, ok)
	}
	want := errors.New("lost")
	d.respond(want)
	if err := d.Error(); err != want {
		t.Fatalf("Error after a cancelled Await: %v, want %v", err, want)
	}
	if err, ok := d.Await(nil, nil); !ok || err != want {
		t.Fatalf("Await after Error: %v %v", err, ok)
	}

	var ok2 deferError
	ok2.init()
	ok2.respond(nil)
	if err, ok := ok2.Await(nil, nil); !ok || err != nil {
		t.Fatalf("answered nil: %v %v", err, ok)
	}
	if err := ok2.Error(); err != nil {
		t.Fatalf("Error after Await: %v", err)
	}

	var down deferError
	down.init()
	down.ShutdownCh = make(chan struct{})
	close(down.ShutdownCh)
	if err, ok := down.Await(nil, nil); !ok || err != ErrRaftShutdown {
		t.Fatalf("shut down: %v %v", err, ok)
	}
}
