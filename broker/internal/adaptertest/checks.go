package adaptertest

import (
	"errors"
	"strings"
	"testing"

	"github.com/txbox/txbox"
)

// IsOutage fails the test unless err is an outage of the way out (no
// attempt spent, never DEAD) whose text names the cause.
func IsOutage(t testing.TB, what string, err error, text string) {
	t.Helper()
	switch {
	case !errors.Is(err, txbox.ErrBrokerUnavailable) || errors.Is(err, txbox.ErrPermanent):
		t.Fatalf("%s: err = %v, want one wrapping txbox.ErrBrokerUnavailable and not txbox.ErrPermanent", what, err)
	case !strings.Contains(err.Error(), text):
		t.Fatalf("%s: err = %v, want it to mention %q", what, err, text)
	}
	t.Logf("%s: %v", what, err)
}

// Verdicts checks the results of one Publish: errs[i] is nil where want[i]
// is "", else a permanent error mentioning want[i] (the subject, header or
// limit an operator reading last_error must learn of).
func Verdicts(t testing.TB, errs []error, want []string) {
	t.Helper()
	for i, w := range want {
		switch {
		case w == "" && errs[i] != nil:
			t.Errorf("message %d: %v, want confirmed", i, errs[i])
		case w != "" && (!errors.Is(errs[i], txbox.ErrPermanent) || !strings.Contains(errs[i].Error(), w)):
			t.Errorf("message %d: %v, want a permanent error mentioning %q", i, errs[i], w)
		}
	}
}
