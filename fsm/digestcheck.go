package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
)

// The replicated digest check (the design is in cluster/raftnode/DESIGN.md, "Digest
// check"). The leader proposes a DigestMark; every node computes its state
// digest as of the mark's index, outside Apply, from a view pinned right
// after the mark was committed locally; the leader then proposes a
// DigestVerdict with the digest at that index, and a node whose own digest
// differs has diverged. Neither command changes state: Decode skips both
// (like a command an older binary does not know, so every version applies
// them the same way), and they carry no stamp, so the FSM clock is not
// advanced by them either.

// DigestMark asks every node for its digest at this entry's index.
type DigestMark struct {
	Stamped
}

// Type implements Command (with IgnoreUnknown: no version applies it).
func (*DigestMark) Type() MsgType { return MsgDigestMark | IgnoreUnknown }

// DigestVerdict is the digest the cluster agreed on at Index.
type DigestVerdict struct {
	Stamped
	Index  uint64 `json:"index"`
	Digest string `json:"digest"`
}

// Type implements Command.
func (*DigestVerdict) Type() MsgType { return MsgDigestVerdict | IgnoreUnknown }

// EncodeDigestMark and EncodeDigestVerdict encode the two commands without
// a stamp (see above).
func EncodeDigestMark() []byte { return []byte{byte(MsgDigestMark | IgnoreUnknown), '{', '}'} }

// EncodeDigestVerdict encodes a verdict for index.
func EncodeDigestVerdict(index uint64, digest string) []byte {
	body, _ := json.Marshal(DigestVerdict{Index: index, Digest: digest})
	return append([]byte{byte(MsgDigestVerdict | IgnoreUnknown)}, body...)
}

// DigestEntry reports whether an encoded entry is a digest mark or verdict
// (kind MsgDigestMark or MsgDigestVerdict, else 0) and a verdict's content.
func DigestEntry(data []byte) (kind MsgType, v DigestVerdict) {
	if len(data) == 0 {
		return 0, v
	}
	switch t := MsgType(data[0]) &^ IgnoreUnknown; t {
	case MsgDigestMark:
		return t, v
	case MsgDigestVerdict:
		if json.Unmarshal(data[1:], &v) != nil {
			return 0, v
		}
		return t, v
	}
	return 0, v
}

// PinDigest pins a view of the state as committed now and returns a
// function computing its digest (the same as Digest at that point) and the
// applied index it describes. Call it right after the entry to check was
// applied and before the next batch (raft's FSM goroutine: cheap, a read
// transaction); run the returned function anywhere, once.
func (f *FSM) PinDigest() (func() (string, uint64, error), error) {
	r, release, err := f.store.View()
	if err != nil {
		return nil, err
	}
	return func() (string, uint64, error) {
		defer release()
		return digestOf(r)
	}, nil
}

// digestOf is Digest over a given view.
func digestOf(r Reader) (string, uint64, error) {
	h := sha256.New()
	v, _, err := r.Get(keyApplied)
	if err != nil {
		return "", 0, err
	}
	idx := getU64(v)
	var n [8]byte
	err = r.Scan(nil, nil, false, func(k, v []byte) bool {
		if isQueryOnly(k) { // a store that keeps every key (labelindex.go)
			return true
		}
		binary.BigEndian.PutUint64(n[:], uint64(len(k)))
		h.Write(n[:])
		h.Write(k)
		binary.BigEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		h.Write(v)
		return true
	})
	return hex.EncodeToString(h.Sum(nil)), idx, err
}
