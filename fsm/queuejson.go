package fsm

import (
	"slices"
	"strconv"
)

// A queue record is JSON (records.go: msgp:ignore QueueState), and every
// submit, claim and completion rewrites its queue's: goccy's reflective
// encode of it was ~5% of an apply's CPU. appendJSON writes the same
// bytes by hand for the records the queue path writes (plain names, no
// rate limits, no automatic concurrency, no paused runs) and declines
// the rest, which goccy encodes as before. Same bytes, so no
// state-machine version: TestQueueJSONEqualsGoccy compares the two on
// any record, and requires the hand path for plain ones.

// jsonAppender is a record that can write its own JSON, exactly as
// goccy/go-json would, or decline (ok false).
type jsonAppender interface {
	appendJSON(dst []byte) (out []byte, ok bool)
}

func (q *QueueState) appendJSON(dst []byte) ([]byte, bool) {
	if q.Auto != nil || q.Limit != nil || q.TypeLimits != nil || q.PausedRuns != nil || !plainJSON(q.Name) {
		return dst, false
	}
	for t := range q.Types {
		if !plainJSON(t) {
			return dst, false
		}
	}
	dst = append(dst, `{"name":"`...)
	dst = append(dst, q.Name...)
	dst = append(dst, `","ready":`...)
	dst = strconv.AppendInt(dst, int64(q.Ready), 10)
	dst = append(dst, `,"running":`...)
	dst = strconv.AppendInt(dst, int64(q.Running), 10)
	dst = append(dst, `,"concurrency":`...)
	dst = strconv.AppendInt(dst, int64(q.Concurrency), 10)
	dst = append(dst, `,"paused":`...)
	dst = strconv.AppendBool(dst, q.Paused)
	if len(q.Types) > 0 {
		dst = append(dst, `,"types":{`...)
		var arr [8]string
		types := arr[:0]
		for t := range q.Types {
			types = append(types, t)
		}
		slices.Sort(types) // goccy writes map keys sorted
		for i, t := range types {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = append(dst, t...)
			dst = append(dst, `":`...)
			dst = strconv.AppendInt(dst, int64(q.Types[t]), 10)
		}
		dst = append(dst, '}')
	}
	if q.Leased != 0 {
		dst = append(dst, `,"leased":`...)
		dst = strconv.AppendUint(dst, q.Leased, 10)
	}
	if q.Throttled != 0 {
		dst = append(dst, `,"throttled":`...)
		dst = strconv.AppendUint(dst, q.Throttled, 10)
	}
	return append(dst, '}'), true
}

// plainJSON reports whether s is written into JSON as it is: printable
// ASCII that goccy neither escapes (quote, backslash) nor HTML-escapes
// (<, >, &).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
