package natsbroker

import "github.com/txbox/txbox/broker"

// EncodedSize is the size encode gives m: headers and payload, before any
// batch header.
func (p *Publisher) EncodedSize(m broker.Message) int {
	_, size, _ := p.encode(m)
	return size
}

// BatchMode is "fast", "atomic" or "" (no batches).
func (p *Publisher) BatchMode() string {
	switch {
	case p.batches == nil:
		return ""
	case p.fast:
		return "fast"
	}
	return "atomic"
}

// Committed counts the batches the stream stored whole.
func (p *Publisher) Committed() uint64 { return p.committed.Load() }

// SubjectMatches is subjectMatches, for the tests of package natsbroker_test.
var SubjectMatches = subjectMatches
