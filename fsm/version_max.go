//go:build !flowd_testv2

package fsm

// MaxVersion is the newest state-machine version this binary applies.
const MaxVersion = V2

// rulesOfBuild: a release build has no rules beyond the registry's.
var rulesOfBuild []Rule

// probeLabels is the upgrade tests' rule; a release build has none.
func (a *applier) probeLabels(labels map[string]string) map[string]string { return labels }
