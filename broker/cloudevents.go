package broker

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/txbox/txbox"
)

// CloudEvents 1.0 attribute names used by every binding. The protocol
// binding adds its own prefix ("ce-" for NATS and HTTP, "ce_" for Kafka,
// "cloudEvents:" for AMQP).
const (
	AttrSpecVersion      = "specversion"
	AttrID               = "id"
	AttrType             = "type"
	AttrSource           = "source"
	AttrSubject          = "subject"
	AttrTime             = "time"
	AttrDataContentType  = "datacontenttype"
	AttrAggregateType    = "aggregatetype"
	AttrAggregateVersion = "aggregateversion"
	AttrTraceParent      = "traceparent"

	SpecVersion = "1.0"
	ContentJSON = "application/json"
)

var extNameRE = regexp.MustCompile(`^[a-z0-9]{1,20}$`)

var reserved = map[string]bool{
	AttrSpecVersion: true, AttrID: true, AttrType: true, AttrSource: true, AttrSubject: true,
	AttrTime: true, AttrDataContentType: true, AttrAggregateType: true, AttrAggregateVersion: true,
	"dataschema": true, "data": true, "data_base64": true,
}

// Attributes maps a message to CloudEvents context attributes, in a stable
// order. Event headers become extension attributes; a header whose name is
// not a valid extension name (lowercase letters and digits, at most 20) is a
// permanent error, so it is reported at the row rather than silently dropped.
func Attributes(m Message) ([][2]string, error) {
	e := m.Event
	src := m.Source
	if src == "" {
		src = "txbox"
	}
	attrs := [][2]string{
		{AttrSpecVersion, SpecVersion},
		{AttrID, e.ID},
		{AttrType, e.Type},
		{AttrSource, src},
		{AttrSubject, e.AggregateID},
		{AttrTime, e.OccurredAt.UTC().Format(time.RFC3339Nano)},
		{AttrDataContentType, ContentJSON},
		{AttrAggregateType, e.AggregateType},
	}
	// 0 means "not versioned" (txbox.Event): no attribute, rather than a
	// version 0 that a consumer checking versions would take as one. A
	// missing attribute reads back as 0, so the round trip keeps it.
	if e.AggregateVersion > 0 {
		attrs = append(attrs, [2]string{AttrAggregateVersion, strconv.FormatInt(e.AggregateVersion, 10)})
	}
	if len(e.Headers) > 0 {
		keys := make([]string, 0, len(e.Headers))
		for k := range e.Headers {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !extNameRE.MatchString(k) || reserved[k] {
				return nil, txbox.Permanent(fmt.Errorf("%w: header %q is not a usable CloudEvents extension name (lowercase letters and digits, 1-20, not a core attribute)", txbox.ErrInvalidEvent, k))
			}
			attrs = append(attrs, [2]string{k, e.Headers[k]})
		}
	}
	return attrs, nil
}

// EventFromAttributes rebuilds the envelope from CloudEvents attributes
// (names without the binding prefix) and the body. Errors wrap
// txbox.ErrPermanent: a malformed message will not get better by redelivery.
func EventFromAttributes(get func(name string) (string, bool), names []string, body []byte) (txbox.Event, error) {
	bad := func(format string, a ...any) (txbox.Event, error) {
		return txbox.Event{}, txbox.Permanent(fmt.Errorf("%w: not a txbox CloudEvent: %s", txbox.ErrInvalidEvent, fmt.Sprintf(format, a...)))
	}
	if v, _ := get(AttrSpecVersion); v != SpecVersion {
		return bad("specversion %q, want %q", v, SpecVersion)
	}
	var e txbox.Event
	var ok bool
	if e.ID, ok = get(AttrID); !ok || e.ID == "" {
		return bad("no id")
	}
	if e.Type, ok = get(AttrType); !ok || e.Type == "" {
		return bad("no type")
	}
	e.AggregateID, _ = get(AttrSubject)
	e.AggregateType, _ = get(AttrAggregateType)
	if v, ok := get(AttrAggregateVersion); ok && v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return bad("aggregateversion %q: %v", v, err)
		}
		e.AggregateVersion = n
	}
	if v, ok := get(AttrTime); ok && v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return bad("time %q: %v", v, err)
		}
		e.OccurredAt = t
	}
	if ct, ok := get(AttrDataContentType); ok && ct != "" && !strings.HasPrefix(ct, ContentJSON) {
		return bad("datacontenttype %q, want %s", ct, ContentJSON)
	}
	e.Payload = append([]byte(nil), body...)
	for _, n := range names {
		if reserved[n] || n == AttrSource {
			continue
		}
		if v, ok := get(n); ok {
			if e.Headers == nil {
				e.Headers = map[string]string{}
			}
			e.Headers[n] = v
		}
	}
	if err := e.Validate(); err != nil {
		return txbox.Event{}, txbox.Permanent(err)
	}
	return e, nil
}
