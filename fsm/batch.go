package fsm

import (
	"encoding/binary"
	"errors"
)

// The binary framing of a Multi (MsgBatch). A group-commit entry carries
// many already-encoded commands; as JSON they were base64 strings inside a
// JSON array, encoded and decoded again on every replica. The framing is
//
//	type byte (MsgBatch) | varint stamp | uvarint count | count × (uvarint len | command bytes)
//
// Each command keeps its own encoding (type byte + payload), so a Multi
// still applies its sub-commands through the one Decode switch.

func batchSize(m *Multi) int {
	n := 1 + 2*binary.MaxVarintLen64
	for _, c := range m.Cmds {
		n += binary.MaxVarintLen64 + len(c)
	}
	return n
}

func appendBatch(buf []byte, m *Multi) []byte {
	buf = append(buf, byte(MsgBatch))
	buf = binary.AppendVarint(buf, m.At)
	buf = binary.AppendUvarint(buf, uint64(len(m.Cmds)))
	for _, c := range m.Cmds {
		buf = binary.AppendUvarint(buf, uint64(len(c)))
		buf = append(buf, c...)
	}
	return buf
}

var errBatchFraming = errors.New("truncated or malformed framing")

// decodeBatch parses a MsgBatch payload (after the type byte). The
// sub-commands alias buf. Garbage gives an error, never a panic or an
// allocation larger than buf.
func decodeBatch(buf []byte) (*Multi, error) {
	at, n := binary.Varint(buf)
	if n <= 0 {
		return nil, errBatchFraming
	}
	buf = buf[n:]
	count, n := binary.Uvarint(buf)
	if n <= 0 || count > uint64(len(buf)) {
		return nil, errBatchFraming
	}
	buf = buf[n:]
	m := &Multi{Cmds: make([][]byte, 0, count)}
	m.At = at
	for range count {
		l, n := binary.Uvarint(buf)
		if n <= 0 || l > uint64(len(buf)-n) {
			return nil, errBatchFraming
		}
		buf = buf[n:]
		m.Cmds = append(m.Cmds, buf[:l:l])
		buf = buf[l:]
	}
	if len(buf) != 0 {
		return nil, errBatchFraming
	}
	return m, nil
}
