package natsbroker

import "github.com/txbox/txbox/broker"

// EncodedSize is the size encode gives m: headers and payload, before any
// batch header.
func (p *Publisher) EncodedSize(m broker.Message) int {
	_, size, _ := p.encode(m)
	return size
}
