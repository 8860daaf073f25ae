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
	work chan job
}

// job is work for a warm goroutine: a directJob, or a function (funcJob).
// An interface, not a func: a pooled directJob is handed over without a
// closure allocated per call.
type job interface{ run() }

type funcJob func()

func (f funcJob) run() { f() }

const warmIdle = 10 * time.Second

func newWarm() *warm { return &warm{work: make(chan job)} }

// do runs f on a warm goroutine and returns when f has returned.
func (w *warm) do(f func()) {
	done := make(chan struct{})
	j := funcJob(func() { defer close(done); f() })
	select {
	case w.work <- j: // an idle warm goroutine took it
	default:
		go w.loop(j)
	}
	<-done
}

// start runs j on a warm goroutine and returns at once.
func (w *warm) start(j job) {
	select {
	case w.work <- j:
	default:
		go w.loop(j)
	}
}

func (w *warm) loop(j job) {
	idle := time.NewTimer(warmIdle)
	defer idle.Stop()
	for {
		j.run()
		idle.Reset(warmIdle)
		select {
		case j = <-w.work:
		case <-idle.C:
			return
		}
	}
}
