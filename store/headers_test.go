package store

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

var headerSeeds = []string{
	`{}`, ` { } `, `{"traceparent":"00-0102-01"}`, `{"a":"1", "b" : "2"}`, "{\n\"a\":\"x\"\n}",
	`{"a":"1","a":"2"}`, `{"a":"\u00e9"}`, `{"a":"x\"y"}`, `{"a":1}`, `{"a":null}`, `{"a":"1",}`,
	`{"a":"1"} x`, `{"a" "1"}`, `{"a":"1"`, `[]`, `null`, `"s"`, ``, `{"é":"ü"}`, "{\"a\":\"\t\"}",
}

// The direct parser agrees with encoding/json on every input it accepts,
// and leaves the rest to it.
func FuzzDecodeHeaders(f *testing.F) {
	for _, s := range headerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) {
			return
		}
		var want map[string]string
		wantErr := json.Unmarshal(b, &want)
		got, ok := plainHeaders(b)
		if !ok {
			return
		}
		if wantErr != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: direct %v, encoding/json %v (%v)", b, got, want, wantErr)
		}
	})
}

func TestDecodeHeadersDirect(t *testing.T) {
	for _, s := range []string{`{}`, `{"traceparent":"00-0102-01","tracestate":"k=v"}`, ` { "a" : "1" , "b":"2" } `} {
		if _, ok := plainHeaders([]byte(s)); !ok {
			t.Errorf("%s: not read directly", s)
		}
	}
	if h, err := decodeHeaders([]byte(`{"a":"x\"y"}`)); err != nil || h["a"] != `x"y` {
		t.Fatalf("escaped value: %v %v", h, err)
	}
	if _, err := decodeHeaders([]byte(`{"a":1}`)); err == nil {
		t.Fatal("a number value decoded")
	}
}
