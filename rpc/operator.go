package rpc

// Params and results of the day-2 operator methods: rolling upgrades
// (operator.upgrade.*) and autopilot (operator.autopilot.state).

// FSMVersion is a node's view of state-machine versions: the cluster's
// active one (as applied here) and the range this binary applies.
type FSMVersion struct {
	Active int `json:"active"`
	Min    int `json:"min"`
	Max    int `json:"max"`
}

// MemberVersion is one member's release and the state-machine versions
// its binary applies, as it answered (or why it did not).
type MemberVersion struct {
	ID      string `json:"id"`
	Voter   bool   `json:"voter"`
	Release string `json:"release,omitempty"` // the binary's version
	Min     int    `json:"min,omitempty"`
	Max     int    `json:"max,omitempty"`
	// Error says why the member's versions are unknown (down, or a release
	// from before versioning, which applies version 1 only).
	Error string `json:"error,omitempty"`
}

// UpgradeStatus of operator.upgrade.status.
type UpgradeStatus struct {
	Active  int             `json:"active"`
	Members []MemberVersion `json:"members"`
	// Target is the highest version every voter applies: what finalize
	// would raise the cluster to (0 when a voter's range is unknown).
	Target int `json:"target"`
	// Blocker says why finalize would not raise it ("" when it would, or
	// the cluster is at Target).
	Blocker string `json:"blocker,omitempty"`
	// AutoFinalizeAfter is the agent's --upgrade-auto-finalize (0: off);
	// EligibleSinceMS, on the leader, when every voter started supporting
	// Target (Unix ms; 0: not eligible).
	AutoFinalizeAfter string `json:"auto_finalize_after,omitempty"`
	EligibleSinceMS   int64  `json:"eligible_since_ms,omitempty"`
}

// AutopilotState of operator.autopilot.state.
type AutopilotState struct {
	Healthy            bool              `json:"healthy"`
	FailureTolerance   int               `json:"failure_tolerance"`
	Leader             string            `json:"leader"`
	CleanupDeadServers bool              `json:"cleanup_dead_servers"`
	Servers            []AutopilotServer `json:"servers"`
}

// AutopilotServer is one server in AutopilotState.
type AutopilotServer struct {
	ID            string `json:"id"`
	Address       string `json:"address"`
	Status        string `json:"status"` // alive | failed | unknown
	Voter         bool   `json:"voter"`
	Leader        bool   `json:"leader"`
	Healthy       bool   `json:"healthy"`
	StableSinceMS int64  `json:"stable_since_ms,omitempty"`
	LastContactMS int64  `json:"last_contact_ms"`
	LastTerm      uint64 `json:"last_term"`
	LastIndex     uint64 `json:"last_index"`
}

// UpgradeResult of operator.upgrade.finalize.
type UpgradeResult struct {
	From    int  `json:"from"`
	To      int  `json:"to"`
	Changed bool `json:"changed"`
}
