package daemon

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/flowd/flowd/rpc"
)

// Who may call what on an agent (docs/operations.md, "Security"). A Unix
// socket caller is identified once per connection by SO_PEERCRED (uid, gid,
// pid, as the kernel recorded them at connect) and SO_PEERGROUPS (its
// supplementary groups), and gets every role whose allow-list names its uid
// or one of its groups; each call is then one AND against the roles its
// method needs (rpc.MethodRoles). A caller with no role gets -32007 for
// every call. uid 0 and the agent's own uid are always admin (they
// can read the data directory anyway); the agent's own group is admin unless
// --allow-admin-gids names the admin groups: exactly who could use the
// 0660 socket before roles existed.

// RoleLists are the allow-lists of one role: uids and gids (numbers, or
// user and group names, comma-separated).
type RoleLists struct {
	UIDs []int
	GIDs []int
}

// accessPolicy maps a caller's credentials to its roles.
type accessPolicy struct {
	admin, worker, read RoleLists
}

func (p *accessPolicy) roles(uid int, gids []int) rpc.Role {
	var r rpc.Role
	match := func(l RoleLists) bool {
		for _, u := range l.UIDs {
			if u == uid {
				return true
			}
		}
		for _, g := range l.GIDs {
			for _, cg := range gids {
				if g == cg {
					return true
				}
			}
		}
		return false
	}
	if match(p.admin) {
		r |= rpc.RoleAdmin
	}
	if match(p.worker) {
		r |= rpc.RoleWorker
	}
	if match(p.read) {
		r |= rpc.RoleRead
	}
	return r
}

// newAccessPolicy builds the policy from the config's allow-lists.
func newAccessPolicy(c *Config) (*accessPolicy, error) {
	p := &accessPolicy{}
	var errs []error
	parse := func(dst *[]int, flag, v string, group bool) {
		ids, err := parseIDList(flag, v, group)
		errs = append(errs, err)
		*dst = append(*dst, ids...)
	}
	p.admin.UIDs = []int{0, os.Geteuid()}
	parse(&p.admin.UIDs, "--allow-admin-uids", c.AllowAdminUIDs, false)
	if strings.TrimSpace(c.AllowAdminGIDs) == "" {
		p.admin.GIDs = []int{os.Getegid()}
	} else {
		parse(&p.admin.GIDs, "--allow-admin-gids", c.AllowAdminGIDs, true)
	}
	parse(&p.worker.UIDs, "--allow-worker-uids", c.AllowWorkerUIDs, false)
	parse(&p.worker.GIDs, "--allow-worker-gids", c.AllowWorkerGIDs, true)
	parse(&p.read.UIDs, "--allow-read-uids", c.AllowReadUIDs, false)
	parse(&p.read.GIDs, "--allow-read-gids", c.AllowReadGIDs, true)
	return p, errors.Join(errs...)
}

// parseRoles parses "admin", "worker,read" or "none".
func parseRoles(s string) (rpc.Role, error) {
	var r rpc.Role
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" || strings.EqualFold(f, "none") {
			continue
		}
		x, err := rpc.ParseRole(f)
		if err != nil {
			return 0, err
		}
		r |= x
	}
	return r, nil
}

// parseIDList parses "0,1000,alice" (users) or "0,wheel" (groups).
func parseIDList(what, s string, group bool) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if n, err := strconv.Atoi(f); err == nil {
			if n < 0 {
				return nil, fmt.Errorf("%s: %d is negative", what, n)
			}
			out = append(out, n)
			continue
		}
		var id string
		if group {
			g, err := user.LookupGroup(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", what, err)
			}
			id = g.Gid
		} else {
			u, err := user.Lookup(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", what, err)
			}
			id = u.Uid
		}
		n, _ := strconv.Atoi(id)
		out = append(out, n)
	}
	return out, nil
}

// peerCred returns the credentials of a Unix socket's peer and its
// supplementary groups (best effort: without SO_PEERGROUPS, the primary
// group only).
func peerCred(uc *net.UnixConn) (uid, gid, pid int, groups []int, err error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, -1, -1, nil, err
	}
	var cred *syscall.Ucred
	var cerr error
	err = raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if cerr != nil {
			return
		}
		groups = peerGroups(fd)
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		return -1, -1, -1, nil, err
	}
	groups = append(groups, int(cred.Gid))
	return int(cred.Uid), int(cred.Gid), int(cred.Pid), groups, nil
}

const soPeerGroups = 59 // SO_PEERGROUPS (Linux 4.13), not in package syscall

func peerGroups(fd uintptr) []int {
	buf := make([]uint32, 64)
	n := uint32(len(buf) * 4)
	_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.SOL_SOCKET, soPeerGroups,
		uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return nil
	}
	out := make([]int, 0, n/4)
	for _, g := range buf[:n/4] {
		out = append(out, int(g))
	}
	return out
}

// socketAdmit identifies Unix socket callers and gives them their roles.
func (a *Agent) socketAdmit(p *accessPolicy, log *slog.Logger) rpc.AdmitFunc {
	return func(nc net.Conn) (rpc.Caller, func(), error) {
		c := rpc.Caller{UID: -1, GID: -1, PID: -1, Addr: "unix"}
		uc, ok := nc.(*net.UnixConn)
		if !ok {
			return c, nil, errors.New("not a unix connection")
		}
		uid, gid, pid, groups, err := peerCred(uc)
		if err != nil {
			log.Warn("connection refused: cannot read the caller's credentials", "err", err)
			return c, nil, &rpc.Refusal{Err: rpc.Errorf(rpc.CodePermissionDenied, "permission denied: the agent cannot read this connection's credentials (%v)", err)}
		}
		c.UID, c.GID, c.PID = uid, gid, pid
		c.Roles = p.roles(uid, groups)
		if c.Roles == rpc.RoleNone {
			// Admitted with no role: every call is answered -32007 (the
			// caller learns why, which a closed connection would not tell
			// it); --max-conns-per-uid bounds what it can hold.
			log.Warn("connection from a caller with no role: every call will be refused", "uid", uid, "gid", gid, "pid", pid)
		}
		return c, nil, nil
	}
}

// forwardAdmit names the member on the forwarding port (from its
// certificate; the handshake listener already checked it is a member).
func forwardAdmit(nc net.Conn) (rpc.Caller, func(), error) {
	c := rpc.Caller{UID: -1, GID: -1, PID: -1, Addr: nc.RemoteAddr().String(), Roles: rpc.RoleAll}
	if tc, ok := nc.(*tls.Conn); ok {
		if cs := tc.ConnectionState(); len(cs.PeerCertificates) > 0 {
			c.Member = cs.PeerCertificates[0].Subject.CommonName
		}
	}
	if c.Member == "" {
		c.Member = "?" // plaintext: some process on a trusted network
	}
	return c, nil, nil
}

// clientOptions are the rpc options of the client listeners (the Unix
// socket and the optional TCP listener): roles and limits.
func (a *Agent) clientOptions() (rpc.Options, error) {
	cfg := &a.cfg
	policy, err := newAccessPolicy(cfg)
	if err != nil {
		return rpc.Options{}, err
	}
	tcpRoles, err := parseRoles(cfg.ClientRole)
	if err != nil {
		return rpc.Options{}, err
	}
	log := a.log.With("component", "rpc")
	sock, tcp := a.socketAdmit(policy, log), a.tcpAdmit(tcpRoles, log) // tcp: acl.go
	return rpc.Options{
		MaxLine: cfg.MaxLine, Logger: log,
		Admit: func(nc net.Conn) (rpc.Caller, func(), error) {
			if _, ok := nc.(*net.UnixConn); ok {
				return sock(nc)
			}
			return tcp(nc)
		},
		MaxConns: cfg.MaxConns, MaxConnsPerUID: cfg.MaxConnsPerUID,
		LineTimeout: cfg.LineTimeout, IdleTimeout: cfg.IdleTimeout, MaxPartialBytes: cfg.MaxPartialBytes,
	}, nil
}
