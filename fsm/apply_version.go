package fsm

import (
	"errors"
	"fmt"
)

// The active state-machine version (registry.go): replicated state, raised
// by SetVersion, never lowered.
//
//	m/fsm_version   the active version (u64); absent: V1
//
// A node whose binary cannot apply a SetVersion's version stops before the
// entry (ApplyBatch hands *VersionError to OnFatal) instead of applying it
// differently from the others; at start it refuses a store whose active
// version it cannot serve (CheckVersion). The leader proposes SetVersion
// only when every voter reports support (daemon/upgrade.go).

var keyVersion = []byte("m/fsm_version")

// ErrNeedsVersion: a command or option the cluster's active version does
// not have yet (the upgrade is not finalized). Apply rejects it on every
// replica alike; the leader refuses to propose it.
var ErrNeedsVersion = errors.New("needs a newer state-machine version")

// SetVersion raises the active state-machine version to Version.
type SetVersion struct {
	Stamped
	Version Version `json:"version"`
}

// Type implements Command.
func (*SetVersion) Type() MsgType { return MsgSetVersion }

// VersionResult is SetVersion's result.
type VersionResult struct {
	From    Version `json:"from"`
	To      Version `json:"to"`
	Changed bool    `json:"changed"`
}

// VersionError is why this binary cannot apply the cluster's state: the
// active version (or one being raised to) is outside [Min, Max].
type VersionError struct {
	Active   Version // the version the cluster runs or moves to
	Min, Max Version // what this binary applies
	Index    uint64  // the entry that raised it (0: found at start)
}

func (e *VersionError) Error() string {
	where := "the cluster's state is at"
	if e.Index != 0 {
		where = fmt.Sprintf("the entry at index %d raises the cluster to", e.Index)
	}
	if e.Active < e.Min {
		return fmt.Sprintf("%s state-machine version %d, older than this binary applies (%d-%d): start the release the cluster ran before, upgrade every agent to it, finalize, then upgrade again", where, e.Active, e.Min, e.Max)
	}
	return fmt.Sprintf("%s state-machine version %d; this binary applies versions %d-%d, so it stops instead of computing a different state: install the flowd release the other members run (`flowd operator upgrade status` shows each member's versions) and start the agent again; a downgrade below the active version is not possible", where, e.Active, e.Min, e.Max)
}

// Is matches ErrNeedsVersion.
func (e *VersionError) Is(target error) bool { return target == ErrNeedsVersion }

func readVersion(r Reader) (Version, error) {
	v, ok, err := r.Get(keyVersion)
	if err != nil || !ok {
		return V1, err
	}
	return Version(getU64(v)), nil
}

// version returns the active version as this entry sees it (an earlier
// SetVersion in the same batch included).
func (a *applier) version() Version {
	v, err := readVersion(a.tx)
	if err != nil {
		panic(err) // a store read error: run() turns it into the entry's error
	}
	return v
}

// atLeast reports whether the rules of version v are in force.
func (a *applier) atLeast(v Version) bool { return v <= V1 || a.version() >= v }

func (a *applier) applySetVersion(c *SetVersion) any {
	cur := a.version()
	switch {
	case c.Version > MaxVersion:
		return &VersionError{Active: c.Version, Min: MinVersion, Max: MaxVersion, Index: a.index}
	case c.Version < cur:
		return fmt.Errorf("%w: state-machine version %d is older than the active version %d; a cluster's version never goes down", ErrInvalidArgument, c.Version, cur)
	case c.Version == cur:
		return &VersionResult{From: cur, To: cur}
	}
	must(a.tx.Set(keyVersion, u64(uint64(c.Version))))
	return &VersionResult{From: cur, To: c.Version, Changed: true}
}

// checkSince rejects a command newer than the active version.
func (a *applier) checkSince(cmd Command) error {
	info := lookup(cmd.Type())
	if info == nil || info.Since <= V1 || a.atLeast(info.Since) {
		return nil
	}
	return fmt.Errorf("%w: %w: %s came with state-machine version %d and the cluster runs %d; finalize the upgrade (`flowd operator upgrade finalize`) once every agent runs the new release", ErrInvalidArgument, ErrNeedsVersion, info.Name, info.Since, a.version())
}

// ActiveVersion returns the cluster's active state-machine version as this
// node has applied it.
//
// It is read from memory: the version as of the last commit, restore or
// open.
func (f *FSM) ActiveVersion() Version { return Version(f.version.Load()) }

// CheckVersion returns a *VersionError when this binary cannot serve the
// state as stored (an agent started on a newer cluster's data, or a
// downgrade below the active version).
func (f *FSM) CheckVersion() error {
	if v := f.ActiveVersion(); v < MinVersion || v > MaxVersion {
		return &VersionError{Active: v, Min: MinVersion, Max: MaxVersion}
	}
	return nil
}
