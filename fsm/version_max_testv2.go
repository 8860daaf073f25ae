//go:build flowd_testv2

package fsm

import (
	"maps"
	"strconv"
)

// This file builds the binary the rolling-upgrade tests upgrade to: one
// state-machine version ahead of the release, with one rule that differs
// (internal/testing/e2e/upgrade_test.go builds it with -tags flowd_testv2).

// vProbe is the test build's new version.
const vProbe = V2 + 1

// MaxVersion is the newest state-machine version this binary applies.
const MaxVersion = vProbe

// LabelFSMVersion is the label the probe rule puts on a new run.
const LabelFSMVersion = "flowd.fsm_version"

var rulesOfBuild = []Rule{{Name: "probe_label", Since: vProbe,
	Doc: "a new run gets the label flowd.fsm_version=<the probe version> (upgrade tests only)"}}

// probeLabels applies the probe rule: from vProbe on, a new run carries
// LabelFSMVersion. Below it, the run is created exactly as the release
// creates it.
func (a *applier) probeLabels(labels map[string]string) map[string]string {
	if !a.atLeast(vProbe) {
		return labels
	}
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[LabelFSMVersion] = strconv.Itoa(int(vProbe))
	return out
}
