package raftnode

import (
	"errors"
	"testing"
)

// blockingFuture is a raft.Future without Await (upstream raft's): Error
// blocks until answer is closed.
type blockingFuture struct {
	answer chan struct{}
	err    error
}

func (f *blockingFuture) Error() error { <-f.answer; return f.err }

// awaitFuture waits on a future without Await in a goroutine: it returns
// the future's error once answered, and gives up (answered false) when
// either channel closes first.
func TestAwaitFutureWithoutAwait(t *testing.T) {
	want := errors.New("lost")
	f := &blockingFuture{answer: make(chan struct{}), err: want}
	close(f.answer)
	if err, ok := awaitFuture(f, nil, nil); !ok || err != want {
		t.Fatalf("answered: %v %v", err, ok)
	}
	for _, which := range []string{"done", "stop"} {
		pending := &blockingFuture{answer: make(chan struct{})}
		closed := make(chan struct{})
		close(closed)
		done, stop := closed, (<-chan struct{})(nil)
		if which == "stop" {
			done, stop = nil, closed
		}
		if err, ok := awaitFuture(pending, done, stop); ok || err != nil {
			t.Fatalf("%s closed: %v %v, want nil false", which, err, ok)
		}
		close(pending.answer) // lets the waiting goroutine end
	}
}
