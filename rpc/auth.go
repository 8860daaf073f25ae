package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Role is a set of caller roles (a bit set). A connection is given its
// roles once, when it is admitted (Options.Admit); every call is then
// checked against the roles its method needs (the Roles of its row in
// methodtable.go, plus admin) with one AND. A method whose row has no roles
// is admin-only: every write that is not a worker's, membership, settings,
// snapshots, queue changes, ACL tokens.
type Role uint8

const (
	// RoleRead may call the reads: gets, lists, waits, events, status.
	RoleRead Role = 1 << iota
	// RoleWorker may call what a worker needs: agent.hello, task.claim,
	// task.heartbeat, task.complete, task.fail.
	RoleWorker
	// RoleAdmin may call every method.
	RoleAdmin

	// RoleNone is a connection that may call nothing.
	RoleNone Role = 0
	// RoleAll is every role (a server without Options.Admit).
	RoleAll = RoleRead | RoleWorker | RoleAdmin
)

var roleNames = []struct {
	r    Role
	name string
}{{RoleAdmin, "admin"}, {RoleWorker, "worker"}, {RoleRead, "read"}}

// String lists the roles ("admin", "worker+read", "none").
func (r Role) String() string {
	var parts []string
	for _, n := range roleNames {
		if r&n.r != 0 {
			parts = append(parts, n.name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// ParseRole parses one role name: admin, worker or read.
func ParseRole(s string) (Role, error) {
	for _, n := range roleNames {
		if strings.EqualFold(strings.TrimSpace(s), n.name) {
			return n.r, nil
		}
	}
	return RoleNone, fmt.Errorf("unknown role %q (want admin, worker or read)", s)
}

// MethodRoles returns the roles that may call method (admin always may).
func MethodRoles(method string) Role { return methodRoles[method] | RoleAdmin }

// AdminOnly reports whether only admin callers may call method.
func AdminOnly(method string) bool { return methodRoles[method] == 0 }

// Caller is who is on the other end of a connection, as the server's
// Options.Admit established it once for the connection.
type Caller struct {
	// UID, GID and PID are the Unix socket peer's credentials
	// (SO_PEERCRED); -1 when unknown (TCP).
	UID, GID, PID int
	// Member is the node id of a cluster member (forwarding port).
	Member string
	// Addr is the remote address ("@" for an unnamed Unix socket peer).
	Addr string
	// Token is the id of the ACL token a TCP caller authenticated with
	// (agent.auth), TokenName its name; "" for none.
	Token, TokenName string
	// Roles are what the connection may call.
	Roles Role
}

// String names the peer for logs: "uid 1000 gid 1000 pid 42",
// "member n2 (10.0.0.2:41234)", "10.0.0.9:5555".
func (p Caller) String() string {
	switch {
	case p.Member != "":
		return "member " + p.Member + " (" + p.Addr + ")"
	case p.UID >= 0:
		return "uid " + strconv.Itoa(p.UID) + " gid " + strconv.Itoa(p.GID) + " pid " + strconv.Itoa(p.PID)
	case p.Token != "":
		return "token " + p.Token + " (" + p.Addr + ")"
	}
	return p.Addr
}

// LogAttrs returns the peer as slog key/value pairs.
func (p Caller) LogAttrs() []any {
	if p.Member != "" {
		return []any{"member", p.Member, "remote", p.Addr}
	}
	if p.UID >= 0 {
		return []any{"uid", p.UID, "gid", p.GID, "pid", p.PID}
	}
	if p.Token != "" {
		return []any{"remote", p.Addr, "token", p.Token, "token_name", p.TokenName}
	}
	return []any{"remote", p.Addr}
}

// CallerOf returns the peer of the connection serving ctx (a handler context
// or a ConnContext); ok is false outside a connection.
func CallerOf(ctx context.Context) (Caller, bool) {
	if cs := connOf(ctx); cs != nil {
		return cs.peer, true
	}
	return Caller{UID: -1, GID: -1, PID: -1}, false
}

type originKey struct{}

// WithOrigin records the caller a forwarded call is made for: the client
// the forwarding agent served (its connection's Caller is the member).
func WithOrigin(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, originKey{}, c)
}

// OriginOf returns the caller a forwarded call was made for; ok is false
// for a call that was not forwarded on someone's behalf.
func OriginOf(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(originKey{}).(Caller)
	return c, ok
}

// Denied is the -32007 answer for method to caller c (who lacks need).
func Denied(c Caller, method string) *Error {
	need := MethodRoles(method)
	hint := "an operator can allow it with the agent's --allow-* flags (docs/operations.md, \"Security\")"
	if c.UID < 0 && c.Member == "" {
		hint = "authenticate with a token of that role (--token or FLOWD_TOKEN; an admin makes one with `flowd acl token create --role ROLE`)"
	}
	return &Error{Code: CodePermissionDenied,
		Message: fmt.Sprintf("permission denied: %s needs the %s role and this caller (%s) has %s; %s",
			method, roleList(need), c.String(), c.Roles, hint),
		Data: mustJSON(map[string]any{"method": method, "role": c.Roles.String(), "needs": roleList(need)}),
	}
}

// ConnID returns a value that identifies the connection serving ctx
// (comparable, usable as a map key), or nil outside a connection.
func ConnID(ctx context.Context) any {
	if cs := connOf(ctx); cs != nil {
		return cs
	}
	return nil
}

// ErrPermissionDenied is the sentinel of CodePermissionDenied.
var ErrPermissionDenied = errors.New("permission denied")

// Refusal is what Options.Admit returns to refuse a connection: the error
// written to the peer (id null) before the connection is closed.
type Refusal struct{ Err *Error }

func (r *Refusal) Error() string { return r.Err.Error() }

// AdmitFunc decides, once per accepted connection, who the peer is and what
// it may call. release (may be nil) is called when the connection ends. A
// non-nil error refuses the connection (a *Refusal's error is written to the
// peer first).
type AdmitFunc func(nc net.Conn) (peer Caller, release func(), err error)

func (s *Server) denied(cs *connState, method string, need Role) error {
	p := cs.peer
	s.log.Warn("rpc: permission denied", append([]any{"method", method, "roles", p.Roles.String(), "needs", need.String()}, p.LogAttrs()...)...)
	return Denied(p, method)
}

func roleList(r Role) string {
	var parts []string
	for _, n := range roleNames {
		if r&n.r != 0 {
			parts = append(parts, n.name)
		}
	}
	return strings.Join(parts, " or ")
}
