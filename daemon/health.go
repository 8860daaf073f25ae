package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
	"github.com/flowd/flowd/rpc"
)

// ExitStorage is the agent's exit code when its local storage failed
// (cluster.ErrStorageFailed): a damaged state store, a raft log that cannot
// be written, a vanished data dir, a full disk. Restarting it without
// fixing the disk fails again; see docs/operations.md, "Storage failures".
const ExitStorage = 70

// healthExempt are the methods an unhealthy node still answers: they say
// what is wrong with it, or take it apart from the cluster
// (rpc.FlagHealthExempt in rpc's method table).
var healthExempt = methodsWith(rpc.FlagHealthExempt)

// refuseUnhealthy makes every client method except healthExempt answer
// -32004 while the node is unhealthy (its storage failed or the digest
// check found its state different from the cluster's): such a node never
// serves state it cannot trust, nor accepts writes it would forward.
func (a *Agent) refuseUnhealthy(methods map[string]rpc.Handler) map[string]rpc.Handler {
	out := make(map[string]rpc.Handler, len(methods))
	for name, h := range methods {
		if healthExempt[name] {
			out[name] = h
			continue
		}
		out[name] = func(ctx context.Context, raw json.RawMessage) (any, error) {
			if reason := a.refusing(); reason != "" {
				return nil, &domain.UnavailableError{Reason: "this node refuses to serve: " + reason + "; use another node", RetryAfter: time.Second}
			}
			return h(ctx, raw)
		}
	}
	return out
}

// unhealthy is why this node must not serve at all, or "".
func (a *Agent) unhealthy() string {
	if a.node == nil {
		return ""
	}
	return a.node.Health()
}

// refusing is unhealthy without the disk check (no system calls on every
// client call): a storage failure found by a raft append or /readyz, or a
// digest divergence.
func (a *Agent) refusing() string {
	if a.node == nil {
		return ""
	}
	return a.node.Serving()
}

// ExitVersion is the agent's exit code when its binary cannot apply the
// cluster's state-machine version (fsm.VersionError): install the release
// the other members run (docs/operations.md, "Rolling upgrades").
const ExitVersion = 78

// IsVersionRefusal reports whether err (from New or Run) says this binary
// cannot apply the cluster's state-machine version.
func IsVersionRefusal(err error) bool {
	var ve *fsm.VersionError
	return errors.As(err, &ve)
}

// IsStorageFailure reports whether err (from New or Run) is a local
// storage failure: the agent should exit with ExitStorage.
func IsStorageFailure(err error) bool {
	var se *store.StorageError
	return errors.Is(err, cluster.ErrStorageFailed) || errors.As(err, &se)
}

// digestInterval and minFreeBytes read FLOWD_DIGEST_INTERVAL (a duration;
// "off" disables the check) and FLOWD_MIN_FREE_BYTES (bytes; 0 or "off":
// never stop for space). Unset: the cluster's defaults (1 min, 128 MiB).
func digestInterval(log *slog.Logger) time.Duration {
	v := os.Getenv("FLOWD_DIGEST_INTERVAL")
	if v == "" {
		return 0
	}
	if v == "off" {
		return -1
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		log.Warn("FLOWD_DIGEST_INTERVAL is not a positive duration; using the default", "value", v)
		return 0
	}
	return d
}

func minFreeBytes(log *slog.Logger) int64 {
	v := os.Getenv("FLOWD_MIN_FREE_BYTES")
	if v == "" {
		return 0
	}
	if v == "off" || v == "0" {
		return -1
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		log.Warn("FLOWD_MIN_FREE_BYTES is not a byte count; using the default", "value", v)
		return 0
	}
	return n
}
