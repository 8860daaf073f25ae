package daemon

import (
	"slices"
	"sync"

	"github.com/flowd/flowd/fsm/domain"
)

// specCache keeps the specs parsed lately, by their shape: the spec's
// bytes with every task's input replaced by null (domain.SpecShape). A
// queue workload submits the same workflow with every job, each with its
// own input, and parsing and validating it was ~12-20 µs of the leader's
// CPU per submit. A hit costs one pass over the bytes (no decoding), a
// copy of the task list and each input validated and compacted
// (domain.FillInputs); it shares the rest of the cached Spec: a parsed
// spec is read-only (the proposal only encodes it; Apply works on its own
// copy, decoded from the log). Errors are not cached: a bad spec is parsed
// every time, so it always gets the general path's full report, and so
// does a shape that hits with an input that is not valid JSON or is too
// large.
//
// Bounded: shapes up to specCacheMaxBytes, at most specCacheEntries of
// them; when full one entry is dropped. Entries hold for the limits they
// were validated with.
type specCache struct {
	mu     sync.Mutex
	limits domain.Limits
	m      map[string]domain.Spec
}

const (
	specCacheEntries  = 128
	specCacheMaxBytes = 4 << 10
)

var shapeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func (c *specCache) parse(raw []byte, lim domain.Limits) (domain.Spec, error) {
	if len(raw) > specCacheMaxBytes+lim.MaxInputBytes { // too large for any shape kept
		return domain.ParseSpec(raw, lim)
	}
	bp := shapeBufs.Get().(*[]byte)
	defer shapeBufs.Put(bp)
	shape, inputs, ok := domain.SpecShape(raw, (*bp)[:0])
	if cap(shape) <= 16<<10 {
		*bp = shape[:0]
	}
	if !ok || len(shape) > specCacheMaxBytes {
		return domain.ParseSpec(raw, lim)
	}
	c.mu.Lock()
	cached, ok := c.m[string(shape)]
	if ok && c.limits != lim {
		ok, c.m = false, nil
	}
	c.mu.Unlock()
	if ok {
		if spec, ok := domain.FillInputs(cached, raw, inputs, lim); ok {
			return spec, nil
		}
		return domain.ParseSpec(raw, lim) // an input is bad: the full report
	}
	spec, err := domain.ParseSpec(raw, lim)
	if err != nil {
		return spec, err
	}
	cached = spec
	cached.Tasks = slices.Clone(spec.Tasks)
	for i := range cached.Tasks {
		cached.Tasks[i].Input = nil
	}
	c.mu.Lock()
	if c.m == nil || c.limits != lim {
		c.m, c.limits = make(map[string]domain.Spec, specCacheEntries), lim
	}
	for k := range c.m {
		if len(c.m) < specCacheEntries {
			break
		}
		delete(c.m, k) // an arbitrary one
	}
	c.m[string(shape)] = cached
	c.mu.Unlock()
	return spec, nil
}
