package fsm

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/flowd/flowd/fsm/domain"
)

// Adaptive concurrency (`concurrency: auto`): a queue's floor, ceiling and
// latency target are replicated in its record (QueueState.Auto), and so is
// its effective cap, which stays in QueueState.Concurrency: dispatch reads
// the cap exactly as it reads a fixed one (QueueState.Dispatching). The
// leader's controller (cluster/raftnode/autoconc.go) decides a new cap with
// domain.NextCap and proposes it as a QueueCap; Apply only checks that the
// cap it is told is within the bounds and that it answers the cap the
// leader saw (From), so every replica agrees without replaying the rule.

// QueueAuto sets queue Name's concurrency to auto within [Min, Max], aiming
// at completion latency TargetLatencyMS (0: the default, 1 s). queue.set
// with a number (QueueSet) turns it off again.
type QueueAuto struct {
	Stamped
	Name            string `json:"name"`
	Min             int    `json:"min"`
	Max             int    `json:"max"`
	TargetLatencyMS int64  `json:"target_latency_ms,omitempty"`
}

// QueueCap moves an auto queue's cap from From to Cap. A cap that is no
// longer From (another change came first), or a queue no longer auto, is a
// lost race (changed: false). LatencyMS and Samples are what the leader
// observed (they make the log readable; Apply does not use them).
type QueueCap struct {
	Stamped
	Name      string `json:"name"`
	From      int    `json:"from"`
	Cap       int    `json:"cap"`
	LatencyMS int64  `json:"latency_ms,omitempty"`
	Samples   int    `json:"samples,omitempty"`
}

func (*QueueAuto) Type() MsgType { return MsgQueueAuto }
func (*QueueCap) Type() MsgType  { return MsgQueueCap }

// autoString renders an auto configuration for events ("auto 1..8 @250ms").
func autoString(a *domain.AutoConcurrency) string {
	return "auto " + itoa(a.Min) + ".." + itoa(a.Max) + " @" + strconv.FormatInt(a.TargetLatencyMS, 10) + "ms"
}

func (a *applier) applyQueueAuto(c *QueueAuto) any {
	if err := validName("queue", c.Name); err != nil {
		return err
	}
	cfg := domain.AutoConcurrency{Min: c.Min, Max: c.Max, TargetLatencyMS: c.TargetLatencyMS}
	if cfg.TargetLatencyMS == 0 {
		cfg.TargetLatencyMS = domain.DefaultTargetLatencyMS
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	q := a.queue(c.Name)
	from := itoa(q.Concurrency)
	next := cfg.Max // a queue new to auto starts at its ceiling
	if q.Auto != nil {
		if *q.Auto == cfg {
			return &ChangedResult{}
		}
		from = autoString(q.Auto) + " cap " + itoa(q.Concurrency)
		next = cfg.Clamp(q.Concurrency)
	}
	q.Auto = &cfg
	q.Concurrency = next
	a.emit(Event{Kind: "queue", Name: c.Name, Queue: c.Name, Transition: "set_concurrency",
		From: from, To: autoString(&cfg) + " cap " + itoa(next)})
	return &ChangedResult{Changed: true}
}

func (a *applier) applyQueueCap(c *QueueCap) any {
	if err := validName("queue", c.Name); err != nil {
		return err
	}
	q := load[QueueState](a, &a.queues, queueKey(c.Name))
	if q == nil || q.Auto == nil || q.Concurrency != c.From || c.Cap == c.From {
		return &ChangedResult{} // turned off, deleted or changed meanwhile
	}
	if c.Cap != q.Auto.Clamp(c.Cap) {
		return fmt.Errorf("%w: cap %d is outside queue %q's auto bounds %d..%d", ErrInvalidArgument, c.Cap, c.Name, q.Auto.Min, q.Auto.Max)
	}
	q.Concurrency = c.Cap
	transition := "decrease_concurrency"
	if c.Cap > c.From {
		transition = "increase_concurrency"
	}
	a.emit(Event{Kind: "queue", Name: c.Name, Queue: c.Name, Transition: transition, From: itoa(c.From), To: itoa(c.Cap)})
	return &ChangedResult{Changed: true}
}

// AutoQueues lists the queues whose concurrency is auto (for the leader's
// controller): one scan of the queue records, decoding only those that
// have auto bounds.
func (f *FSM) AutoQueues() ([]QueueState, error) {
	var out []QueueState
	err := f.View(func(r Reader) error {
		var derr error
		err := r.Scan(pfxQueue, nil, false, func(_, v []byte) bool {
			if !bytes.Contains(v, autoMember) {
				return true
			}
			var q QueueState
			if derr = unmarshal(v, &q); derr != nil {
				return false
			}
			if q.Auto != nil {
				out = append(out, q)
			}
			return true
		})
		return firstErr(err, derr)
	})
	return out, err
}

var autoMember = []byte(`"auto":`)
