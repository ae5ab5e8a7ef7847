package sqlstore

import "encoding/json"

// EncodeHeaders is the inbox's stored form of headers.
func EncodeHeaders(h map[string]string) *string {
	if len(h) == 0 {
		return nil
	}
	b, _ := json.Marshal(h)
	s := string(b)
	return &s
}

// DecodeHeaders reverses EncodeHeaders; bad data yields nil.
func DecodeHeaders(s *string) map[string]string {
	if s == nil || *s == "" {
		return nil
	}
	var h map[string]string
	if json.Unmarshal([]byte(*s), &h) != nil {
		return nil
	}
	return h
}
