//go:build flowd_testv2

package fsm

import (
	"strconv"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// The probe rule of the test build is in force only once the active version
// is raised: the same log replayed gives the same state, labels included.
func TestProbeRuleOnlyFromItsVersion(t *testing.T) {
	h := newHarness(t)
	spec := `{"tasks":[{"key":"a","type":"t"}]}`
	h.submit("before", spec)
	if r, _ := h.run("before"); r.Labels[LabelFSMVersion] != "" {
		t.Fatalf("rule in force at version 1: %v", r.Labels)
	}
	// The release's newest version is not the probe's: no label yet.
	h.ok(&SetVersion{Version: vProbe - 1})
	h.submit("release", spec)
	if r, _ := h.run("release"); r.Labels[LabelFSMVersion] != "" {
		t.Fatalf("rule in force at version %d: %v", vProbe-1, r.Labels)
	}
	if got := h.ok(&SetVersion{Version: vProbe}).(*VersionResult); !got.Changed || got.From != vProbe-1 || got.To != vProbe {
		t.Fatalf("raise: %+v", got)
	}
	h.submit("after", spec)
	if r, _ := h.run("after"); r.Labels[LabelFSMVersion] != strconv.Itoa(int(vProbe)) {
		t.Fatalf("rule not in force at version %d: %v", vProbe, r.Labels)
	}
	wantErr(t, h.apply(&SetVersion{Version: V1}), domain.ErrInvalidArgument)
	replay, err := New(store.NewMemStore(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	replay.ApplyBatch(h.log)
	d, _, _ := replay.Digest()
	if d != h.digest() {
		t.Fatal("replaying the log gave another state")
	}
}
