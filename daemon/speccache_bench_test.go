package daemon

import (
	"strconv"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// BenchmarkSpecCacheQueueJob: the leader's parse of a queue job's
// workflow (one task, its own 200-byte input per job), through the cache.
func BenchmarkSpecCacheQueueJob(b *testing.B) {
	var c specCache
	raws := make([][]byte, 64)
	for i := range raws {
		raws[i] = []byte(`{"name":"q","tasks":[{"key":"job","type":"noop","input":{"seq":` + strconv.Itoa(i) + `,"pad":"` + strings.Repeat("x", 180) + `"}}]}`)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := c.parse(raws[i%len(raws)], domain.DefaultLimits); err != nil {
			b.Fatal(err)
		}
	}
}
