package rpc

import (
	"bytes"
	"encoding/json"
	"testing"

	gojson "github.com/goccy/go-json"
)

// scanCallSeeds are request lines and whether scanCall reads them (the
// rest go the map's way).
var scanCallSeeds = []struct {
	line string
	scan bool
}{
	{`{"jsonrpc":"2.0","id":1,"method":"run.submit","params":{"id":"a","workflow":{"tasks":[{"key":"k","type":"t","input":{"s":"}]\""}}]}}}`, true},
	{`{"id":"x-1","params":[1,2,{"a":[]}],"method":"task.claim","jsonrpc":"2.0"}`, true},
	{`{ "jsonrpc" : "2.0" , "id" : -12.5e3 , "method" : "m" }`, true},
	{`{"jsonrpc":"2.0","id":7,"method":"m","params":null}`, true},
	{`{"jsonrpc":"2.0","id":"\"q\\","method":"m","params":{}}`, true},
	{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\u00e9\n"}}  `, true},
	{`{"jsonrpc":"2.0","id":null,"method":"m"}`, false},                     // a notification
	{`{"jsonrpc":"2.0","id":1,"method":"m","method":"n"}`, false},           // a duplicate member
	{`{"jsonrpc":"2.0","id":1,"\u006dethod":"m"}`, false},                   // an escaped name
	{`{"jsonrpc":"2.0","id":1,"method":"m\u0031"}`, false},                  // an escaped method
	{`{"jsonrpc":"2.0","id":1,"method":"m","params":3}`, false},             // params not a structure
	{`{"jsonrpc":"2.0","id":1,"method":"m","extra":true}`, false},           // an extra member
	{`{"jsonrpc":"2.0","id":true,"method":"m"}`, false},                     // not an id
	{`{"jsonrpc":"1.0","id":1,"method":"m"}`, false},                        // another version
	{`{"jsonrpc":"2.0","id":1,"method":""}`, false},                         // no method
	{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,}}`, false},      // not JSON
	{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"a":2}}`, false}, // a duplicate inside
	{`{}`, false},
}

// scanCall never accepts a line the map-decoding path would not serve
// directly, and when it accepts one it finds the same id, method and
// params.
func checkScanCall(t *testing.T, line []byte) {
	id, method, params, ok := scanCall(line)
	if !ok {
		return
	}
	var obj map[string]json.RawMessage
	if err := gojson.Unmarshal(line, &obj); err != nil || obj == nil {
		t.Fatalf("scanCall accepted %q, which does not decode as an object (%v)", line, err)
	}
	wid, wmethod, wparams, wok := directCall(obj)
	if !wok {
		t.Fatalf("scanCall accepted %q, which directCall refuses", line)
	}
	if !bytes.Equal(id, wid) || !bytes.Equal(method, wmethod) || !bytes.Equal(params, wparams) {
		t.Fatalf("%q: scanCall read id %q method %q params %q; directCall %q %q %q", line, id, method, params, wid, wmethod, wparams)
	}
}

func TestScanCallAgreesWithTheMapPath(t *testing.T) {
	for _, c := range scanCallSeeds {
		checkScanCall(t, []byte(c.line))
		if _, _, _, ok := scanCall([]byte(c.line)); ok != c.scan {
			t.Errorf("scanCall(%s) ok = %v, want %v", c.line, ok, c.scan)
		}
	}
}

func FuzzScanCall(f *testing.F) {
	for _, c := range scanCallSeeds {
		f.Add([]byte(c.line))
	}
	f.Fuzz(checkScanCall)
}

func BenchmarkRequestEnvelope(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":12345,"method":"agent.forward","params":{"method":"run.submit","params":{"id":"0193a7b2-0000-7000-8000-000000000000","workflow":{"name":"pq","tasks":[{"key":"job","type":"pq.job","input":{"seq":1,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}]},"nonce":"n-1"},"deadline_ms":1760000000000,"for":{"uid":0,"gid":0,"pid":1,"roles":7}}}`)
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var obj map[string]json.RawMessage
			if gojson.Unmarshal(line, &obj) != nil {
				b.Fatal("decode")
			}
			if _, _, _, ok := directCall(obj); !ok {
				b.Fatal("not direct")
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, _, _, ok := scanCall(line); !ok {
				b.Fatal("not direct")
			}
		}
	})
}
