package store

import "encoding/json"

// decodeHeaders decodes the headers column, a JSON object of strings. The
// common shape (keys and values without escapes, as the write API stores
// traceparent and the like) is read directly: encoding/json's reflection
// cost the relay about as much per traced event as the tracing itself.
// Anything else goes to encoding/json, which also reports the errors. The
// caller has checked that b is valid UTF-8.
func decodeHeaders(b []byte) (map[string]string, error) {
	if h, ok := plainHeaders(b); ok {
		return h, nil
	}
	var h map[string]string
	err := json.Unmarshal(b, &h)
	return h, err
}

// plainHeaders parses b when it is an object of plain strings; ok is false
// for anything else, including anything malformed.
func plainHeaders(b []byte) (h map[string]string, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	h = map[string]string{}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return h, skipSpace(b, i+1) == len(b)
	}
	for {
		k, j, ok := plainString(b, i)
		if !ok {
			return nil, false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		v, j, ok := plainString(b, skipSpace(b, i+1))
		if !ok {
			return nil, false
		}
		h[k] = v // a repeated key keeps the last value, as encoding/json does
		i = skipSpace(b, j)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return h, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

// plainString reads the JSON string starting at b[i] if it has no escape
// and no control character; next is the index after its closing quote.
func plainString(b []byte, i int) (s string, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return string(b[i+1 : j]), j + 1, true
		case c == '\\' || c < 0x20:
			return "", 0, false
		}
	}
	return "", 0, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
