package daemon

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestPprofOnlyBehindItsFlag(t *testing.T) {
	for _, on := range []bool{false, true} {
		a := &Agent{cfg: Config{Pprof: on}}
		a.metrics = &metrics{reg: prometheus.NewRegistry()}
		mux := a.httpHandler()
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil))
		if got := rec.Code == http.StatusOK; got != on {
			t.Errorf("--pprof=%v: /debug/pprof/ answered %d", on, rec.Code)
		}
	}
}
