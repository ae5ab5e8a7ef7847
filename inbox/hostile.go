package inbox

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/store"
)

// decode turns a delivery into an event the inbox can record, or says why
// it cannot. Beyond what the broker's decoding checks, the event must be a
// valid envelope and hold only text every store keeps (valid UTF-8, no NUL):
// otherwise the store would refuse the inbox row on every redelivery and the
// message would come back forever. Such a message is parked as undecodable.
func decode(d broker.Delivery) (txbox.Event, error) {
	ev, err := d.Event()
	if err != nil {
		return ev, err
	}
	if err := ev.Validate(); err != nil {
		return txbox.Event{}, txbox.Permanent(err)
	}
	if err := store.CheckText(ev); err != nil {
		return txbox.Event{}, err
	}
	return ev, nil
}

// usableID reports whether a broker's message id can key the inbox row of a
// parked message in every store: at most 64 bytes of valid UTF-8, no NUL,
// and no surrounding spaces (MySQL's PAD SPACE collation ignores trailing
// ones, so "a " would collide with "a"). Otherwise a synthetic id is used.
func usableID(id string) bool {
	return id != "" && len(id) <= 64 && plainText(id)
}

// plainText is true for valid UTF-8 without NUL bytes or surrounding
// whitespace: what an inbox key (event id, consumer name) must be.
func plainText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 && strings.TrimSpace(s) == s
}

// parkRefused parks an event whose data the store refused to record
// (an error wrapping txbox.ErrInvalidEvent from the inbox dialect): it will
// be refused again on every redelivery, so it is kept raw, as an undecodable
// message is, and acknowledged. It reports what to do with the delivery.
func (c *Consumer) parkRefused(ctx context.Context, ev txbox.Event, cause error) (ack bool, delay time.Duration) {
	h := map[string]string{
		"ce-id": ev.ID, "ce-type": ev.Type, "ce-aggregatetype": ev.AggregateType, "ce-subject": ev.AggregateID,
	}
	for k, v := range ev.Headers {
		h["ce-"+k] = v
	}
	d := &refusedDelivery{ev: ev, raw: broker.RawMessage{ID: ev.ID, Headers: h, Body: ev.Payload}}
	c.parkUndecodable(ctx, d, cause)
	return d.acked, d.delay
}

// refusedDelivery carries a refused event through parkUndecodable and
// records its verdict for the real delivery.
type refusedDelivery struct {
	ev    txbox.Event
	raw   broker.RawMessage
	acked bool
	delay time.Duration
}

func (d *refusedDelivery) Event() (txbox.Event, error) { return d.ev, nil }
func (d *refusedDelivery) Raw() broker.RawMessage      { return d.raw }
func (d *refusedDelivery) Attempt() int                { return 0 }
func (d *refusedDelivery) Ack(context.Context) error   { d.acked = true; return nil }
func (d *refusedDelivery) Nak(_ context.Context, delay time.Duration) error {
	d.delay = delay
	return nil
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
