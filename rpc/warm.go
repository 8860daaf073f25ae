package rpc

import "time"

// warm runs handlers on long-lived goroutines. jrpc2 starts a goroutine per
// request, with a small stack; a handler's first deep call (a JSON encoder's
// VM, spec parsing, a raft proposal) then grows that stack by copying it,
// and the profile of a loaded agent showed that copying as several percent
// of its CPU, paid again by every request. A warm goroutine has grown its
// stack already; the request's goroutine only waits for it (one channel
// hand-off). Goroutines are started on demand, so there are never more than
// requests in progress, and one idle for warmIdle exits.
type warm struct {
	work chan func()
}

const warmIdle = 10 * time.Second

func newWarm() *warm { return &warm{work: make(chan func())} }

// do runs f on a warm goroutine and returns when f has returned.
func (w *warm) do(f func()) {
	done := make(chan struct{})
	job := func() { defer close(done); f() }
	select {
	case w.work <- job: // an idle warm goroutine took it
	default:
		go w.loop(job)
	}
	<-done
}

// start runs f on a warm goroutine and returns at once.
func (w *warm) start(f func()) {
	select {
	case w.work <- f:
	default:
		go w.loop(f)
	}
}

func (w *warm) loop(job func()) {
	idle := time.NewTimer(warmIdle)
	defer idle.Stop()
	for {
		job()
		idle.Reset(warmIdle)
		select {
		case job = <-w.work:
		case <-idle.C:
			return
		}
	}
}
