package daemon

import (
	"bytes"
	"sync"

	"github.com/flowd/flowd/fsm/domain"
)

// specCache keeps the specs parsed lately, by their exact bytes. A queue
// workload submits the same workflow with every job, and parsing and
// validating it was ~20 µs of the leader's CPU per submit (~3% of it). A
// hit returns the same Spec value, its slices shared: a parsed spec is
// read-only (the proposal only encodes it; Apply works on its own copy,
// decoded from the log). Errors are not cached: a bad spec is parsed every
// time, so it always gets the general path's full report.
//
// Only specs without task inputs are cached: a spec that carries one
// (`"input"` anywhere in its bytes) is usually per-job data, unique to its
// submit, and caching it would cost a copy and an eviction per submit for
// no hit. Bounded: specs up to specCacheMaxBytes, at most specCacheEntries
// of them; when full one entry is dropped. Entries hold for the limits
// they were validated with.
type specCache struct {
	mu     sync.Mutex
	limits domain.Limits
	m      map[string]domain.Spec
}

var inputMember = []byte(`"input"`)

const (
	specCacheEntries  = 128
	specCacheMaxBytes = 4 << 10
)

func (c *specCache) parse(raw []byte, lim domain.Limits) (domain.Spec, error) {
	if len(raw) > specCacheMaxBytes || bytes.Contains(raw, inputMember) {
		return domain.ParseSpec(raw, lim)
	}
	c.mu.Lock()
	spec, ok := c.m[string(raw)]
	if ok && c.limits != lim {
		ok, c.m = false, nil
	}
	c.mu.Unlock()
	if ok {
		return spec, nil
	}
	spec, err := domain.ParseSpec(raw, lim)
	if err != nil {
		return spec, err
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
	c.m[string(raw)] = spec
	c.mu.Unlock()
	return spec, nil
}
