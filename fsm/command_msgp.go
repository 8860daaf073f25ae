package fsm

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/tinylib/msgp/msgp"

	"github.com/flowd/flowd/fsm/domain"
)

// Binary commands.
//
// The commands a queue job is made of (Submit, Claim, Complete, Fail,
// Heartbeat) are MessagePack tuples, like the records they turn into: every
// replica decodes every one of them, and goccy's JSON decoding of a submit's
// spec, its re-encoding as the spec record and the leader's encoding were
// about a tenth of an apply. Marshal and Decode pick them up through the
// msgp interfaces (codec.go), so an entry's type byte is unchanged and an
// entry written as JSON before (its body starts with '{') still decodes.
//
// They are written by hand, not generated: a Submit holds a domain.Spec,
// and fsm/domain is stdlib only (no generated methods there); the few
// types are small. The rules are the records' (codec.go): fields in
// declaration order, append-only (a new field goes last; a decoder of this
// version skips fields it does not know, and an older tuple decodes with
// the new fields zero), maps written in key order.
//
// A decoded command equals what decoding its JSON encoding gave
// (TestBinaryCommandsDecodeAsJSONDid): an omitted (omitempty) field and an
// empty one both decode as nil, a nil slice without omitempty as nil and an
// empty one as empty. RawMessage inputs and results keep the caller's bytes
// (JSON compacted them; they are valid JSON either way: they were parsed
// out of a request). Lengths are checked against the bytes left before
// anything is allocated, so a hostile entry cannot claim a huge array.
//
// All agents of a cluster must run a version that reads these encodings (a
// type byte followed by a tuple); an older one rejects such entries, as it
// does every command it does not know (docs/semantics.md).

// tupleReader decodes a tuple field by field. Fields past the encoded
// ones read as zero; encoded fields past the known ones are skipped by done.
type tupleReader struct {
	b    []byte
	n, i uint32
	err  error
}

func readTuple(b []byte) tupleReader {
	var t tupleReader
	t.n, t.b, t.err = msgp.ReadArrayHeaderBytes(b)
	if t.err == nil && int64(t.n) > int64(len(t.b)) {
		t.err = fmt.Errorf("tuple of %d fields in %d bytes", t.n, len(t.b))
	}
	return t
}

// field reports whether the next field is encoded (and no error occurred).
func (t *tupleReader) field() bool {
	if t.err != nil || t.i >= t.n {
		return false
	}
	t.i++
	return true
}

// nilField consumes the next field if it is nil and reports whether it was.
func (t *tupleReader) nilField() bool {
	if t.err != nil || t.i >= t.n || !msgp.IsNil(t.b) {
		return false
	}
	t.i++
	t.b, t.err = msgp.ReadNilBytes(t.b)
	return true
}

func (t *tupleReader) str(v *string) {
	if t.field() {
		*v, t.b, t.err = msgp.ReadStringBytes(t.b)
	}
}

func (t *tupleReader) i64(v *int64) {
	if t.field() {
		*v, t.b, t.err = msgp.ReadInt64Bytes(t.b)
	}
}

func (t *tupleReader) int(v *int) {
	if t.field() {
		*v, t.b, t.err = msgp.ReadIntBytes(t.b)
	}
}

func (t *tupleReader) u64(v *uint64) {
	if t.field() {
		*v, t.b, t.err = msgp.ReadUint64Bytes(t.b)
	}
}

// raw reads a nil or a copy of a bin.
func (t *tupleReader) raw(v *json.RawMessage) {
	if t.nilField() || !t.field() {
		return
	}
	var b []byte
	b, t.b, t.err = msgp.ReadBytesZC(t.b)
	if t.err == nil {
		*v = slices.Clone(b)
	}
}

// strs reads nil or an array of strings.
func (t *tupleReader) strs(v *[]string) {
	t.array(func(n uint32) {
		out := make([]string, n)
		for i := range out {
			if out[i], t.b, t.err = msgp.ReadStringBytes(t.b); t.err != nil {
				return
			}
		}
		*v = out
	})
}

// array reads nil (leaving the field zero) or an array header and calls
// each with its length, checked against the bytes left.
func (t *tupleReader) array(each func(n uint32)) {
	if t.nilField() || !t.field() {
		return
	}
	var n uint32
	if n, t.b, t.err = msgp.ReadArrayHeaderBytes(t.b); t.err != nil {
		return
	}
	if int64(n) > int64(len(t.b)) {
		t.err = fmt.Errorf("array of %d in %d bytes", n, len(t.b))
		return
	}
	each(n)
}

// sub decodes a nested value with dec, which returns the bytes after it.
func (t *tupleReader) sub(dec func([]byte) ([]byte, error)) {
	if t.field() {
		t.b, t.err = dec(t.b)
	}
}

// done skips the fields this version does not know and returns the bytes
// after the tuple.
func (t *tupleReader) done() ([]byte, error) {
	for t.err == nil && t.i < t.n {
		t.i++
		t.b, t.err = msgp.Skip(t.b)
	}
	return t.b, t.err
}

func appendRaw(o []byte, v json.RawMessage) []byte {
	if len(v) == 0 {
		return msgp.AppendNil(o)
	}
	return msgp.AppendBytes(o, v)
}

// appendStrs writes an omitempty slice: nil when empty.
func appendStrs(o []byte, v []string) []byte {
	if len(v) == 0 {
		return msgp.AppendNil(o)
	}
	o = msgp.AppendArrayHeader(o, uint32(len(v)))
	for _, s := range v {
		o = msgp.AppendString(o, s)
	}
	return o
}

// specMsg is domain.Spec with its tuple codec; it is also how the spec
// record is stored.
type specMsg domain.Spec

// MarshalMsg implements msgp.Marshaler.
func (s *specMsg) MarshalMsg(o []byte) ([]byte, error) {
	// finally (version 2) is written only when set: a spec without it
	// keeps the 4-field tuple earlier binaries write.
	if len(s.Finally) > 0 {
		o = msgp.AppendArrayHeader(o, 5)
	} else {
		o = msgp.AppendArrayHeader(o, 4)
	}
	o = msgp.AppendString(o, s.Name)
	o = msgp.AppendString(o, s.OnFailure)
	o = msgp.AppendInt64(o, s.DeadlineMS)
	if s.Tasks == nil { // "tasks" has no omitempty: nil and empty differ
		o = msgp.AppendNil(o)
	} else {
		o = appendTaskSpecs(o, s.Tasks)
	}
	if len(s.Finally) > 0 {
		o = appendTaskSpecs(o, s.Finally)
	}
	return o, nil
}

// UnmarshalMsg implements msgp.Unmarshaler.
func (s *specMsg) UnmarshalMsg(b []byte) ([]byte, error) {
	*s = specMsg{}
	t := readTuple(b)
	t.str(&s.Name)
	t.str(&s.OnFailure)
	t.i64(&s.DeadlineMS)
	t.array(func(n uint32) { s.Tasks = t.taskSpecs(n) })
	t.array(func(n uint32) {
		if n > 0 {
			s.Finally = t.taskSpecs(n)
		}
	})
	return t.done()
}

func appendTaskSpecs(o []byte, ts []domain.TaskSpec) []byte {
	o = msgp.AppendArrayHeader(o, uint32(len(ts)))
	for i := range ts {
		o = appendTaskSpec(o, &ts[i])
	}
	return o
}

func (t *tupleReader) taskSpecs(n uint32) []domain.TaskSpec {
	out := make([]domain.TaskSpec, n)
	for i := range out {
		if t.b, t.err = decodeTaskSpec(t.b, &out[i]); t.err != nil {
			return nil
		}
	}
	return out
}

func appendTaskSpec(o []byte, s *domain.TaskSpec) []byte {
	// The fields of state-machine version 2 (when, trigger, duration_ms,
	// until) are written only when one is set: a spec without them keeps
	// the 13-field tuple every earlier binary writes, byte for byte
	// (replicas of two releases store equal spec records during a rolling
	// upgrade).
	v2 := s.When != "" || s.Trigger != "" || s.DurationMS != 0 || s.Until != "" || s.ForEach != "" || s.MaxParallel != 0 || s.Definition != "" || s.Spec != nil
	switch {
	case s.Spec != nil: // an inline child spec, nested
		o = msgp.AppendArrayHeader(o, 21)
	case v2:
		o = msgp.AppendArrayHeader(o, 20)
	default:
		o = msgp.AppendArrayHeader(o, 13)
	}
	o = msgp.AppendString(o, s.Key)
	o = msgp.AppendString(o, s.Type)
	o = msgp.AppendString(o, s.Queue)
	o = appendRaw(o, s.Input)
	o = appendStrs(o, s.Deps)
	if r := s.Retry; r == nil {
		o = msgp.AppendNil(o)
	} else {
		o = msgp.AppendArrayHeader(o, 4)
		o = msgp.AppendInt(o, r.MaxAttempts)
		o = msgp.AppendInt64(o, r.InitialBackoffMS)
		o = msgp.AppendInt64(o, r.MaxBackoffMS)
		o = msgp.AppendFloat64(o, r.Multiplier)
	}
	o = msgp.AppendInt64(o, s.LeaseMS)
	o = msgp.AppendInt32(o, s.Priority)
	o = msgp.AppendString(o, s.RevertType)
	o = msgp.AppendInt64(o, s.TimeoutMS)
	o = msgp.AppendInt64(o, s.ScheduleToStartMS)
	o = msgp.AppendString(o, s.Signal)
	o = msgp.AppendString(o, s.ScheduleToStartPolicy)
	if v2 {
		o = msgp.AppendString(o, s.When)
		o = msgp.AppendString(o, s.Trigger)
		o = msgp.AppendInt64(o, s.DurationMS)
		o = msgp.AppendString(o, s.Until)
		o = msgp.AppendString(o, s.ForEach)
		o = msgp.AppendInt(o, s.MaxParallel)
		o = msgp.AppendString(o, s.Definition)
	}
	if s.Spec != nil {
		o, _ = (*specMsg)(s.Spec).MarshalMsg(o)
	}
	return o
}

func decodeTaskSpec(b []byte, s *domain.TaskSpec) ([]byte, error) {
	t := readTuple(b)
	t.str(&s.Key)
	t.str(&s.Type)
	t.str(&s.Queue)
	t.raw(&s.Input)
	t.strs(&s.Deps)
	if !t.nilField() {
		t.sub(func(b []byte) ([]byte, error) {
			r := &domain.RetryPolicy{}
			rt := readTuple(b)
			rt.int(&r.MaxAttempts)
			rt.i64(&r.InitialBackoffMS)
			rt.i64(&r.MaxBackoffMS)
			if rt.field() {
				r.Multiplier, rt.b, rt.err = msgp.ReadFloat64Bytes(rt.b)
			}
			s.Retry = r
			return rt.done()
		})
	}
	t.i64(&s.LeaseMS)
	if t.field() {
		s.Priority, t.b, t.err = msgp.ReadInt32Bytes(t.b)
	}
	t.str(&s.RevertType)
	t.i64(&s.TimeoutMS)
	t.i64(&s.ScheduleToStartMS)
	t.str(&s.Signal)
	t.str(&s.ScheduleToStartPolicy)
	t.str(&s.When)
	t.str(&s.Trigger)
	t.i64(&s.DurationMS)
	t.str(&s.Until)
	t.str(&s.ForEach)
	t.int(&s.MaxParallel)
	t.str(&s.Definition)
	t.sub(func(b []byte) ([]byte, error) {
		sp := &specMsg{}
		rest, err := sp.UnmarshalMsg(b)
		s.Spec = (*domain.Spec)(sp)
		return rest, err
	})
	return t.done()
}

// MarshalMsg implements msgp.Marshaler.
func (c *Submit) MarshalMsg(o []byte) ([]byte, error) {
	o = msgp.AppendArrayHeader(o, 9)
	o = msgp.AppendInt64(o, c.At)
	o = msgp.AppendString(o, c.ID)
	o, _ = (*specMsg)(&c.Spec).MarshalMsg(o)
	o = appendRaw(o, c.Input)
	o, _ = Labels(c.Labels).MarshalMsg(o) // in key order: equal commands, equal bytes
	o = msgp.AppendString(o, c.IfFull)
	o = msgp.AppendString(o, c.Nonce)
	o = msgp.AppendInt64(o, c.StartAt)
	return msgp.AppendInt64(o, c.DelayMS), nil
}

// UnmarshalMsg implements msgp.Unmarshaler.
func (c *Submit) UnmarshalMsg(b []byte) ([]byte, error) {
	*c = Submit{}
	t := readTuple(b)
	t.i64(&c.At)
	t.str(&c.ID)
	t.sub((*specMsg)(&c.Spec).UnmarshalMsg)
	t.raw(&c.Input)
	t.sub((*Labels)(&c.Labels).UnmarshalMsg) // none: nil, as JSON's omitted labels
	t.str(&c.IfFull)
	t.str(&c.Nonce)
	t.i64(&c.StartAt)
	t.i64(&c.DelayMS)
	return t.done()
}

func appendWaiter(o []byte, w *Waiter) []byte {
	o = msgp.AppendArrayHeader(o, 5)
	o = msgp.AppendString(o, w.WorkerID)
	o = appendStrs(o, w.Queues)
	o = appendStrs(o, w.Types)
	o = msgp.AppendInt(o, w.Max)
	return msgp.AppendString(o, w.RequestID)
}

func decodeWaiter(b []byte, w *Waiter) ([]byte, error) {
	t := readTuple(b)
	t.str(&w.WorkerID)
	t.strs(&w.Queues)
	t.strs(&w.Types)
	t.int(&w.Max)
	t.str(&w.RequestID)
	return t.done()
}

// MarshalMsg implements msgp.Marshaler.
func (c *Claim) MarshalMsg(o []byte) ([]byte, error) {
	o = msgp.AppendArrayHeader(o, 2)
	o = msgp.AppendInt64(o, c.At)
	if c.Waiters == nil { // "waiters" has no omitempty
		return msgp.AppendNil(o), nil
	}
	o = msgp.AppendArrayHeader(o, uint32(len(c.Waiters)))
	for i := range c.Waiters {
		o = appendWaiter(o, &c.Waiters[i])
	}
	return o, nil
}

// UnmarshalMsg implements msgp.Unmarshaler.
func (c *Claim) UnmarshalMsg(b []byte) ([]byte, error) {
	*c = Claim{}
	t := readTuple(b)
	t.i64(&c.At)
	t.array(func(n uint32) {
		ws := make([]Waiter, n)
		for i := range ws {
			if t.b, t.err = decodeWaiter(t.b, &ws[i]); t.err != nil {
				return
			}
		}
		c.Waiters = ws
	})
	return t.done()
}

func appendLog(o []byte, l *LogChunk) []byte {
	if l == nil {
		return msgp.AppendNil(o)
	}
	o = msgp.AppendArrayHeader(o, 3)
	if len(l.Lines) == 0 {
		o = msgp.AppendNil(o)
	} else {
		o = msgp.AppendArrayHeader(o, uint32(len(l.Lines)))
		for _, ln := range l.Lines {
			o = msgp.AppendArrayHeader(o, 3)
			o = msgp.AppendInt64(o, ln.At)
			o = msgp.AppendString(o, ln.Stream)
			o = msgp.AppendString(o, ln.Line)
		}
	}
	if l.Seq == nil {
		o = msgp.AppendNil(o)
	} else {
		o = msgp.AppendInt(o, *l.Seq)
	}
	return msgp.AppendInt(o, l.Dropped)
}

// log reads a nil or a LogChunk.
func (t *tupleReader) log(v **LogChunk) {
	if t.nilField() {
		return
	}
	t.sub(func(b []byte) ([]byte, error) {
		l := &LogChunk{}
		lt := readTuple(b)
		lt.array(func(n uint32) {
			lines := make([]LogLine, n)
			for i := range lines {
				ln := readTuple(lt.b)
				ln.i64(&lines[i].At)
				ln.str(&lines[i].Stream)
				ln.str(&lines[i].Line)
				if lt.b, lt.err = ln.done(); lt.err != nil {
					return
				}
			}
			l.Lines = lines
		})
		if !lt.nilField() && lt.field() {
			var seq int
			seq, lt.b, lt.err = msgp.ReadIntBytes(lt.b)
			l.Seq = &seq
		}
		lt.int(&l.Dropped)
		*v = l
		return lt.done()
	})
}

// appendTaskHead opens the tuple of a command on one attempt of a task
// (complete, fail, heartbeat): n fields, the first three its stamp, the
// task and the attempt's fencing token.
func appendTaskHead(o []byte, n uint32, at int64, taskID string, token uint64) []byte {
	o = msgp.AppendArrayHeader(o, n)
	o = msgp.AppendInt64(o, at)
	o = msgp.AppendString(o, taskID)
	return msgp.AppendUint64(o, token)
}

// taskHead reads what appendTaskHead wrote after the header.
func (t *tupleReader) taskHead(at *int64, taskID *string, token *uint64) {
	t.i64(at)
	t.str(taskID)
	t.u64(token)
}

// MarshalMsg implements msgp.Marshaler.
func (c *Complete) MarshalMsg(o []byte) ([]byte, error) {
	o = appendTaskHead(o, 7, c.At, c.TaskID, c.Token)
	o = appendRaw(o, c.Result)
	if len(c.Spawn) == 0 {
		o = msgp.AppendNil(o)
	} else {
		o = appendTaskSpecs(o, c.Spawn)
	}
	if c.Claim == nil {
		o = msgp.AppendNil(o)
	} else {
		o = appendWaiter(o, c.Claim)
	}
	return appendLog(o, c.Log), nil
}

// UnmarshalMsg implements msgp.Unmarshaler.
func (c *Complete) UnmarshalMsg(b []byte) ([]byte, error) {
	*c = Complete{}
	t := readTuple(b)
	t.taskHead(&c.At, &c.TaskID, &c.Token)
	t.raw(&c.Result)
	t.array(func(n uint32) { c.Spawn = t.taskSpecs(n) })
	if !t.nilField() {
		t.sub(func(b []byte) ([]byte, error) {
			c.Claim = &Waiter{}
			return decodeWaiter(b, c.Claim)
		})
	}
	t.log(&c.Log)
	return t.done()
}

// MarshalMsg implements msgp.Marshaler.
func (c *Fail) MarshalMsg(o []byte) ([]byte, error) {
	o = appendTaskHead(o, 6, c.At, c.TaskID, c.Token)
	o = msgp.AppendString(o, c.Error)
	if c.Retryable == nil {
		o = msgp.AppendNil(o)
	} else {
		o = msgp.AppendBool(o, *c.Retryable)
	}
	return appendLog(o, c.Log), nil
}

// UnmarshalMsg implements msgp.Unmarshaler.
func (c *Fail) UnmarshalMsg(b []byte) ([]byte, error) {
	*c = Fail{}
	t := readTuple(b)
	t.taskHead(&c.At, &c.TaskID, &c.Token)
	t.str(&c.Error)
	if !t.nilField() && t.field() {
		var r bool
		r, t.b, t.err = msgp.ReadBoolBytes(t.b)
		c.Retryable = &r
	}
	t.log(&c.Log)
	return t.done()
}

// MarshalMsg implements msgp.Marshaler.
func (c *Heartbeat) MarshalMsg(o []byte) ([]byte, error) {
	o = appendTaskHead(o, 4, c.At, c.TaskID, c.Token)
	return appendLog(o, c.Log), nil
}

// UnmarshalMsg implements msgp.Unmarshaler.
func (c *Heartbeat) UnmarshalMsg(b []byte) ([]byte, error) {
	*c = Heartbeat{}
	t := readTuple(b)
	t.taskHead(&c.At, &c.TaskID, &c.Token)
	t.log(&c.Log)
	return t.done()
}

// loadSpec reads run id's spec record (a tuple, or JSON written before).
func loadSpec(r Reader, id string) (*domain.Spec, error) {
	s, err := getJSON[specMsg](r, specKey(id))
	return (*domain.Spec)(s), err
}
