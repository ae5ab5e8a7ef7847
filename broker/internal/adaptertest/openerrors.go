package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/testenv"
)

// ConfigRefused checks that each open, by what it tries, fails with a
// *txbox.ConfigError mentioning text ("" for any): a setting the relay's
// retries cannot mend.
func ConfigRefused(t testing.TB, text string, opens map[string]func(context.Context) error) {
	t.Helper()
	for what, open := range opens {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := open(ctx)
		cancel()
		if !errors.Is(err, txbox.ErrConfig) || !strings.Contains(err.Error(), text) {
			t.Errorf("%s: %v, want a config error mentioning %q", what, err, text)
		}
	}
}

// WrongPasswordAndNoServer checks the two ways of failing that an Open
// must tell apart: rawURL with user and a wrong password is a
// configuration error, the same URL where nothing listens an outage; and
// neither error shows the password. open opens url (see Opening), giving
// up after connectTimeout (0 for the adapter's default).
func WrongPasswordAndNoServer(t testing.TB, rawURL, user string, open func(url string, connectTimeout time.Duration) func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const password = "s3cr3t-wrong"
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	err = open(u.String(), 0)(ctx)
	if !errors.Is(err, txbox.ErrConfig) {
		t.Errorf("wrong password: %v, want a config error", err)
	}
	if err != nil && strings.Contains(err.Error(), password) {
		t.Errorf("error shows the password: %v", err)
	}
	u.Host = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	err = open(u.String(), time.Second)(ctx)
	if !errors.Is(err, txbox.ErrBrokerUnavailable) {
		t.Errorf("nothing listening: %v, want ErrBrokerUnavailable", err)
	}
	if err != nil && strings.Contains(err.Error(), password) {
		t.Errorf("error shows the password: %v", err)
	}
}
