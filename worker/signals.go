package worker

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// RunWithSignals runs the worker until SIGTERM or SIGINT, then drains
// (stops claiming, finishes and reports in-flight tasks, returns nil). A
// second signal stops at once: in-flight handlers are cancelled and their
// leases expire, so the tasks are retried.
func (w *Worker) RunWithSignals(ctx context.Context) error {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	runCtx, stopClaiming := context.WithCancel(ctx)
	defer stopClaiming()
	go func() {
		select {
		case s := <-sig:
			w.log.Info("signal: draining (send again to stop at once)", "signal", s.String())
			stopClaiming()
		case <-runCtx.Done():
			return
		}
		select {
		case <-sig:
			w.log.Warn("second signal: stopping now")
			w.Stop()
		case <-w.hard.Done():
		}
	}()
	return w.Run(runCtx)
}
