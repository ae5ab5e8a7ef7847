package adminview

import "encoding/json"

// RawJSON keeps valid JSON as it is and quotes anything else, so a garbage
// payload (a foreign producer may write anything) is still shown rather
// than breaking the output. Empty is nil.
func RawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return b
	}
	q, _ := json.Marshal(string(b))
	return q
}
