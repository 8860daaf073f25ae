package fsm

import gojson "github.com/goccy/go-json"

// Records and commands are JSON, so state stays inspectable (flowd snapshot
// inspect) and evolvable. The codec is goccy/go-json, a drop-in for
// encoding/json that is about a third cheaper on the apply path; like
// encoding/json it sorts map keys, which determinism needs (replicas must
// write identical bytes).
var (
	marshal   = gojson.Marshal
	unmarshal = gojson.Unmarshal
)
