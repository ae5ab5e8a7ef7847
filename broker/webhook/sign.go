package webhookbroker

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Signature headers, as named by the Standard Webhooks specification
// (https://www.standardwebhooks.com), whose libraries in many languages
// verify them.
const (
	// HeaderID is the message id: the event id, the same on every retry,
	// so a receiver can drop a repeated delivery by it.
	HeaderID = "webhook-id"
	// HeaderTimestamp is the sending time in Unix seconds.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature is "v1," followed by the base64 HMAC-SHA256 of
	// id + "." + timestamp + "." + body under the shared secret. A receiver
	// accepts the request when any of its space-separated signatures
	// matches one of its secrets.
	HeaderSignature = "webhook-signature"
)

// defaultTolerance is how far a request's timestamp may lie from the
// receiver's clock, either way, before it is refused as a replay.
const defaultTolerance = 5 * time.Minute

// minKey is the shortest signing key accepted, in bytes.
const minKey = 16

// Key turns a shared secret into the HMAC key. A secret in the Standard
// Webhooks form "whsec_<base64>" is the base64-decoded bytes, as those
// libraries use it; any other secret is its own bytes. Keys shorter than 16
// bytes are refused. The error never contains the secret.
func Key(secret string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, errors.New("secret starts with whsec_ but the rest is not base64")
		}
		secret = string(key)
	}
	if len(secret) < minKey {
		return nil, fmt.Errorf("secret is %d bytes; use at least %d (e.g. 32 random bytes)", len(secret), minKey)
	}
	return []byte(secret), nil
}

// Sign returns the HeaderSignature value for one request.
func Sign(key []byte, id string, timestamp time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, strconv.FormatInt(timestamp.Unix(), 10), body))
}

func mac(key []byte, id, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// verifier checks the signature headers of a request.
type verifier struct {
	keys      [][]byte
	tolerance time.Duration
	now       func() time.Time
}

func newVerifier(secrets []string, tolerance time.Duration) (*verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("no secret")
	}
	v := &verifier{tolerance: tolerance, now: time.Now}
	if v.tolerance <= 0 {
		v.tolerance = defaultTolerance
	}
	for i, s := range secrets {
		k, err := Key(s)
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		}
		v.keys = append(v.keys, k)
	}
	return v, nil
}

// verify reports why the request is not authentic, or nil.
func (v *verifier) verify(id, ts, sigs string, body []byte) error {
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("missing %s, %s or %s header", HeaderID, HeaderTimestamp, HeaderSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%s %q is not Unix seconds", HeaderTimestamp, ts)
	}
	at := time.Unix(sec, 0)
	if d := v.now().Sub(at); d > v.tolerance || d < -v.tolerance {
		return fmt.Errorf("%s is %v away from the receiver's clock, beyond the tolerance of %v (replayed, or clocks out of sync)", HeaderTimestamp, d.Round(time.Second), v.tolerance)
	}
	for _, k := range v.keys {
		want := mac(k, id, ts, body)
		for _, s := range strings.Fields(sigs) {
			ver, b64, ok := strings.Cut(s, ",")
			if !ok || ver != "v1" {
				continue
			}
			got, err := base64.StdEncoding.DecodeString(b64)
			if err == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return errors.New("no valid v1 signature for this body under the receiver's secrets")
}
