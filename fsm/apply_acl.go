package fsm

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ACL tokens: bearer tokens for the TCP client listener (docs/operations.md,
// "Security"). The state holds only each token's SHA-256 hash, never its
// secret: the secret is made (crypto/rand) by the agent that handles
// acl.token.create, outside Apply, returned to its caller once, and
// forgotten. A token carries one role.
//
//	acl/t/<id>       ACLToken (JSON)
//	acl/h/<hash>     the id of the token with that hash (hex SHA-256)

var (
	pfxACLToken = []byte("acl/t/")
	pfxACLHash  = []byte("acl/h/")
)

func aclTokenKey(id string) []byte  { return cat(pfxACLToken, []byte(id)) }
func aclHashKey(hash string) []byte { return cat(pfxACLHash, []byte(hash)) }

// MaxACLTokens bounds the tokens a cluster holds.
const MaxACLTokens = 10000

// ACLRoles are the roles a token may carry.
var ACLRoles = []string{"admin", "worker", "read"}

// ACLToken is one token as stored: its public id, name, role and the hash
// of its secret.
type ACLToken struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	Role string `json:"role"`
	// Hash is the hex SHA-256 of the secret.
	Hash        string `json:"hash"`
	CreatedAt   int64  `json:"created_at"`
	CreateIndex uint64 `json:"create_index"`
}

// ACLTokenCreate stores a token (idempotent by ID: the same id and hash
// again answers the stored token with Created false).
type ACLTokenCreate struct {
	Stamped
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	Role string `json:"role"`
	Hash string `json:"hash"`
}

// ACLTokenDelete forgets a token.
type ACLTokenDelete struct {
	Stamped
	ID string `json:"id"`
}

func (*ACLTokenCreate) Type() MsgType { return MsgACLTokenCreate }
func (*ACLTokenDelete) Type() MsgType { return MsgACLTokenDelete }

// ACLTokenResult answers ACLTokenCreate.
type ACLTokenResult struct {
	Token   ACLToken `json:"token"`
	Created bool     `json:"created"`
}

// ValidateACLToken checks a create command's fields (before proposing and
// again in Apply).
func ValidateACLToken(c *ACLTokenCreate) error {
	switch {
	case !validACLID(c.ID):
		return fmt.Errorf("%w: token id %q must be 1-64 of [A-Za-z0-9_-]", ErrInvalidArgument, c.ID)
	case !slices.Contains(ACLRoles, c.Role):
		return fmt.Errorf("%w: role %q: want admin, worker or read", ErrInvalidArgument, c.Role)
	case len(c.Hash) != 64 || strings.Trim(c.Hash, "0123456789abcdef") != "":
		return fmt.Errorf("%w: hash must be the 64 lower-case hex digits of a SHA-256", ErrInvalidArgument)
	case len(c.Name) > 128 || !utf8.ValidString(c.Name) || strings.ContainsFunc(c.Name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%w: name must be UTF-8 without control characters, at most 128 bytes", ErrInvalidArgument)
	}
	return nil
}

func validACLID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func (a *applier) applyACLTokenCreate(c *ACLTokenCreate) any {
	if err := ValidateACLToken(c); err != nil {
		return err
	}
	old, err := getJSON[ACLToken](a.tx, aclTokenKey(c.ID))
	must(err)
	if old != nil {
		if old.Hash == c.Hash && old.Role == c.Role {
			return &ACLTokenResult{Token: *old} // a retry
		}
		return fmt.Errorf("%w: token id %q is taken; leave the id out to get a new one", ErrInvalidArgument, c.ID)
	}
	_, taken, err := a.tx.Get(aclHashKey(c.Hash))
	must(err)
	if taken {
		return fmt.Errorf("%w: another token has this secret; make a new secret", ErrInvalidArgument)
	}
	n := 0
	must(a.tx.Scan(pfxACLToken, nil, false, func(_, _ []byte) bool { n++; return n < MaxACLTokens }))
	if n >= MaxACLTokens {
		return fmt.Errorf("%w: the cluster holds %d tokens, the most it keeps; delete unused ones (`flowd acl token list`, `flowd acl token delete ID`)", ErrInvalidArgument, n)
	}
	t := ACLToken{ID: c.ID, Name: c.Name, Role: c.Role, Hash: c.Hash, CreatedAt: a.now, CreateIndex: a.index}
	a.put(aclTokenKey(c.ID), &t)
	must(a.tx.Set(aclHashKey(c.Hash), []byte(c.ID)))
	a.emit(Event{Kind: "acl", Name: c.ID, Transition: "token_create", To: c.Role})
	return &ACLTokenResult{Token: t, Created: true}
}

func (a *applier) applyACLTokenDelete(c *ACLTokenDelete) any {
	old, err := getJSON[ACLToken](a.tx, aclTokenKey(c.ID))
	must(err)
	if old == nil {
		return &ChangedResult{}
	}
	a.del(aclTokenKey(c.ID))
	a.del(aclHashKey(old.Hash))
	a.emit(Event{Kind: "acl", Name: c.ID, Transition: "token_delete", From: old.Role})
	return &ChangedResult{Changed: true}
}

// Reads.

// ACLTokens lists the tokens by id.
func (f *FSM) ACLTokens() ([]ACLToken, error) {
	var out []ACLToken
	err := f.View(func(r Reader) error {
		var uerr error
		err := r.Scan(pfxACLToken, nil, false, func(_, v []byte) bool {
			var t ACLToken
			if uerr = unmarshal(v, &t); uerr != nil {
				return false
			}
			out = append(out, t)
			return true
		})
		if err == nil {
			err = uerr
		}
		return err
	})
	return out, err
}

// ACLTokenByHash returns the token whose secret hashes to hash (hex
// SHA-256), or nil.
func (f *FSM) ACLTokenByHash(hash string) (*ACLToken, error) {
	var t *ACLToken
	err := f.View(func(r Reader) error {
		id, ok, err := r.Get(aclHashKey(hash))
		if err != nil || !ok {
			return err
		}
		t, err = getJSON[ACLToken](r, aclTokenKey(string(id)))
		return err
	})
	return t, err
}

// ACLTokenExists reports whether token id is stored.
func (f *FSM) ACLTokenExists(id string) (bool, error) {
	var ok bool
	err := f.View(func(r Reader) (err error) {
		_, ok, err = r.Get(aclTokenKey(id))
		return err
	})
	return ok, err
}
