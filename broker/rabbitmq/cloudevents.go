package rabbitmqbroker

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/ce"
)

// Header names on the wire.
const (
	// HeaderPrefix starts every CloudEvents attribute header txbox writes:
	// the CloudEvents AMQP binding's preferred "cloudEvents_".
	HeaderPrefix = "cloudEvents_"
	// headerPrefixColon is the binding's other prefix, read but not
	// written.
	headerPrefixColon = "cloudEvents:"
	// headerAttempt is set on a Nak'd message's retry copy: the attempt
	// the copy will be when it comes back.
	headerAttempt = "txbox-attempt"
	// headerTopic is set on a retry copy: the routing key the message was
	// first published with (the copy travels under the retry queue's name).
	headerTopic = "txbox-topic"
)

// encode builds the publishing for m, or says why it can never be sent.
func encode(m broker.Message, maxPayload, maxHeaders int) (amqp.Publishing, error) {
	e := m.Event
	if err := ValidateRoutingKey(m.Topic); err != nil {
		return amqp.Publishing{}, txbox.Permanent(fmt.Errorf("rabbitmq: event %s: %w", e.ID, err))
	}
	if maxPayload > 0 && len(e.Payload) > maxPayload {
		return amqp.Publishing{}, txbox.Permanent(fmt.Errorf("rabbitmq: event %s for %q: payload of %d bytes is over the limit of %d (the broker's max_message_size)",
			e.ID, m.Topic, len(e.Payload), maxPayload))
	}
	attrs, err := broker.Attributes(m)
	if err != nil {
		return amqp.Publishing{}, err
	}
	h := make(amqp.Table, len(attrs))
	size := 0
	for _, a := range attrs {
		if a[0] == broker.AttrDataContentType {
			continue // the binding maps it to the content_type property
		}
		h[HeaderPrefix+a[0]] = a[1]
		size += len(HeaderPrefix) + len(a[0]) + len(a[1]) + 6
	}
	// Properties travel in one frame, which must fit the negotiated
	// frame_max; the broker closes the connection otherwise.
	if maxHeaders > 0 && size > maxHeaders {
		return amqp.Publishing{}, txbox.Permanent(fmt.Errorf("rabbitmq: event %s: headers of %d bytes are over the %d that fit in one AMQP frame", e.ID, size, maxHeaders))
	}
	return amqp.Publishing{
		Headers:      h,
		ContentType:  broker.ContentJSON,
		DeliveryMode: amqp.Persistent,
		MessageId:    e.ID,
		Timestamp:    e.OccurredAt.UTC().Truncate(time.Second),
		Body:         e.Payload,
	}, nil
}

// ValidateRoutingKey reports why key cannot be a routing key: empty, or
// longer than the 255 bytes of an AMQP short string.
func ValidateRoutingKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("empty routing key")
	case len(key) > 255:
		return fmt.Errorf("routing key of %d bytes is longer than AMQP's 255: %.40q...", len(key), key)
	}
	return nil
}

// decode rebuilds the event from the attribute headers (either prefix, any
// case) and the body. content_type stands for datacontenttype.
func decode(d *amqp.Delivery) (txbox.Event, error) {
	attrs := ce.Attrs{}
	for k, v := range d.Headers {
		n, ok := cutPrefixFold(k, HeaderPrefix)
		if !ok {
			n, ok = cutPrefixFold(k, headerPrefixColon)
		}
		if !ok || n == "" {
			continue
		}
		n = strings.ToLower(n)
		s, ok := headerString(v)
		if !ok {
			return txbox.Event{}, ce.Malformed("attribute %s has a value of type %T", n, v)
		}
		if err := attrs.Add(n, s); err != nil {
			return txbox.Event{}, err
		}
	}
	return attrs.Event(d.ContentType, d.Body)
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return "", false
}

// headerString is the canonical string form of an AMQP header value, as the
// binding requires consumers to accept native types too (a timestamp, a
// long, a boolean, binary).
func headerString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return base64.StdEncoding.EncodeToString(x), true
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano), true
	case bool:
		return strconv.FormatBool(x), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	}
	if n, ok := integer(v); ok {
		return strconv.FormatInt(n, 10), true
	}
	return "", false
}

// headerInt reads an integer header value of any AMQP integer type, or its
// decimal text.
func headerInt(v any) (int64, bool) {
	if s, ok := v.(string); ok {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	return integer(v)
}

// integer is v when it is an integer of a type that fits in an int64.
func integer(v any) (int64, bool) {
	switch v.(type) {
	case int8, int16, int32, int64, int, uint8, uint16, uint32:
		r := reflect.ValueOf(v)
		if r.CanInt() {
			return r.Int(), true
		}
		return int64(r.Uint()), true
	}
	return 0, false
}
