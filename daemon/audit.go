package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowd/flowd/rpc"
)

// The audit log (docs/operations.md, "Audit log"): every call of an
// admin-only method (rpc.AdminOnly: membership, settings, snapshots, queue
// changes, run verbs, and any method added later until the role table in
// rpc/auth.go gives it to another role) is logged once it has been
// answered, at info level, with the fixed message "audit":
//
//	method    the method
//	uid, gid, pid          a Unix socket caller (SO_PEERCRED)
//	member, remote         a member that forwarded the call (its certificate's node id)
//	remote                 a TCP client
//	listener  where it came in: "unix:SOCKET", "tcp:ADDR" or "forward:ADDR"
//	forwarded true when another agent forwarded the call to this leader
//	params    the call's top-level scalar params (ids, names, numbers, paths);
//	          objects and arrays (workflows, inputs, labels) are left out,
//	          strings cut at 128 bytes, anything named like a secret redacted
//	outcome   "ok" or "error"; code and error (the code's name) when not ok
//	ms        how long the call took
//
// A call forwarded by a follower is logged twice: by the follower, with the
// client's uid and the leader's answer, and by the leader, with the member.
// Calls refused for their role never reach a handler: the rpc server logs
// them ("rpc: permission denied", warn).
//
// run.submit is the one admin-only method logged at debug level instead:
// it is the data path (hundreds per second, where agent CPU per job is the
// limit) and every run it creates is already recorded in the replicated
// state and its events; --log-level debug shows them.

// auditMsg is the message of every audit entry.
const auditMsg = "audit"

// auditDebug are the admin-only methods audited at debug level.
// The chunks of a snapshot transfer too: the transfer's start and end
// (snapshot.save, snapshot.upload, snapshot.restore) are audited at info.
var auditDebug = map[string]bool{rpc.MethodRunSubmit: true, rpc.MethodSnapshotRead: true, rpc.MethodSnapshotWrite: true}

// audited returns m with every admin-only method wrapped in the audit log;
// the other methods (reads, worker calls) are returned as they are.
func (a *Agent) audited(m map[string]rpc.Handler) map[string]rpc.Handler {
	out := make(map[string]rpc.Handler, len(m))
	for name, h := range m {
		if !rpc.AdminOnly(name) {
			out[name] = h
			continue
		}
		level := slog.LevelInfo
		if auditDebug[name] {
			level = slog.LevelDebug
		}
		out[name] = a.auditHandler(name, level, h)
	}
	return out
}

func (a *Agent) auditHandler(method string, level slog.Level, h rpc.Handler) rpc.Handler {
	return func(ctx context.Context, raw json.RawMessage) (res any, err error) {
		if !a.log.Enabled(ctx, level) {
			return h(ctx, raw)
		}
		start := time.Now()
		panicked := true
		defer func() {
			if panicked {
				// The server recovers it as -32603; record it as such.
				a.audit(ctx, level, method, raw, start, rpc.Errorf(rpc.CodeInternal, "panic"))
			}
		}()
		res, err = h(ctx, raw)
		panicked = false
		a.audit(ctx, level, method, raw, start, err)
		return res, err
	}
}

func (a *Agent) audit(ctx context.Context, level slog.Level, method string, raw json.RawMessage, start time.Time, err error) {
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs, slog.String("method", method))
	c, ok := rpc.CallerOf(ctx)
	switch {
	case !ok:
		attrs = append(attrs, slog.String("caller", "internal"))
	case c.Member != "":
		attrs = append(attrs, slog.String("member", c.Member), slog.String("remote", c.Addr),
			slog.String("listener", "forward:"+a.cfg.ForwardAddr))
	case c.UID >= 0:
		attrs = append(attrs, slog.Int("uid", c.UID), slog.Int("gid", c.GID), slog.Int("pid", c.PID),
			slog.String("listener", "unix:"+a.cfg.Socket))
	default:
		attrs = append(attrs, slog.String("remote", c.Addr), slog.String("listener", "tcp:"+a.cfg.ClientAddr))
		if c.Token != "" {
			attrs = append(attrs, slog.String("token", c.Token), slog.String("token_name", c.TokenName))
		}
	}
	if ok {
		attrs = append(attrs, slog.String("roles", c.Roles.String()))
	}
	if o, fwd := rpc.OriginOf(ctx); fwd {
		// A forwarded call: whom the follower served (uid on its socket).
		attrs = append(attrs, slog.String("for", o.String()), slog.String("for_roles", o.Roles.String()))
	}
	if isForwarded(ctx) {
		attrs = append(attrs, slog.Bool("forwarded", true))
	}
	if ps := auditParams(raw); len(ps) > 0 {
		attrs = append(attrs, slog.Attr{Key: "params", Value: slog.GroupValue(ps...)})
	}
	if err == nil {
		attrs = append(attrs, slog.String("outcome", "ok"))
	} else {
		e := rpc.ToError(err)
		attrs = append(attrs, slog.String("outcome", "error"), slog.Int("code", e.Code), slog.String("error", rpc.CodeName(e.Code)))
	}
	attrs = append(attrs, slog.Int64("ms", time.Since(start).Milliseconds()))
	a.log.LogAttrs(ctx, level, auditMsg, attrs...)
}

// auditMaxString bounds a string param in the audit log.
const auditMaxString = 128

// auditParams returns the key params of a call: the top-level members of a
// params object whose values are strings, numbers or booleans, in name
// order. Payloads (objects, arrays) are never logged.
func auditParams(raw json.RawMessage) []slog.Attr {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []slog.Attr
	for _, k := range keys {
		v := m[k]
		if len(v) == 0 {
			continue
		}
		key := k
		if len(key) > 64 {
			key = key[:64]
		}
		if secretParam(k) {
			out = append(out, slog.String(key, "[redacted]"))
			continue
		}
		switch v[0] {
		case '"':
			var s string
			if json.Unmarshal(v, &s) != nil {
				continue
			}
			if len(s) > auditMaxString {
				cut := auditMaxString
				for cut > 0 && !utf8.RuneStart(s[cut]) {
					cut--
				}
				s = s[:cut] + "…"
			}
			out = append(out, slog.String(key, s))
		case 't', 'f':
			out = append(out, slog.Bool(key, v[0] == 't'))
		case 'n', '{', '[':
			// null, or a payload: not logged.
		default:
			out = append(out, slog.Any(key, json.Number(v)))
		}
	}
	return out
}

func secretParam(k string) bool {
	k = strings.ToLower(k)
	for _, s := range []string{"token", "secret", "password", "key_pem", "private"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}
