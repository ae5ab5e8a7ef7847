package redact_test

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/txbox/txbox/internal/redact"
)

func TestURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u:s3cret@127.0.0.1:5432/x?sslmode=disable", "postgres://u:xxxxx@127.0.0.1:5432/x?sslmode=disable"},
		{"postgres://app@db/shop", "postgres://app@db/shop"},
		{"mysql://root@127.0.0.1:3306/test", "mysql://root@127.0.0.1:3306/test"},
		{"postgres://u@h/x?sslmode=disable&password=s3cret", "postgres://u@h/x?sslmode=disable&password=xxxxx"},
		{"postgres://u@h/x?sslpassword=s3cret&sslkey=/k.pem", "postgres://u@h/x?sslpassword=xxxxx&sslkey=/k.pem"},
		{"host=db user=app password=s3cret dbname=x", "host=db user=app password=xxxxx dbname=x"},
		{"host=db password='s3 cret' dbname=x", "host=db password=xxxxx dbname=x"},
		{"nats://u:s3cret@h1:4222,nats://v:t0psecret@h2:4222", "nats://u:xxxxx@h1:4222,nats://v:xxxxx@h2:4222"},
		{"nats://s3cret@127.0.0.1:4222", "nats://xxxxx@127.0.0.1:4222"},
		{"nats://127.0.0.1:4222, nats://127.0.0.1:4223", "nats://127.0.0.1:4222, nats://127.0.0.1:4223"},
		{"postgres://u:pa ss@h/x", "postgres://xxxxx@h/x"},
		{"postgres://u:s3cret@h1:5432,h2:5432/x", "postgres://u:xxxxx@h1:5432,h2:5432/x"},
		{"postgres://u:12/s3cret@h/x", "postgres://xxxxx@h/x"},
		{"redis://:s3cret@127.0.0.1:6379/0", "redis://:xxxxx@127.0.0.1:6379/0"},
		{"//u:s3cret@h/x", "//u:xxxxx@h/x"},
		{"not a url", "not a url"},
		{"u:s3cret@tcp(127.0.0.1:3306)/test?parseTime=true", "xxxxx@tcp(127.0.0.1:3306)/test?parseTime=true"},
		{"https://hooks.example/x?token=s3cret&x=1", "https://hooks.example/x?token=xxxxx&x=1"},
		// The cases the broker adapters' own redaction covered.
		{"nats://bob:s3cret@h:4222", "nats://bob:xxxxx@h:4222"},
		{"tls://a:s3cret@h1:4222, nats://h2:4222", "tls://a:xxxxx@h1:4222, nats://h2:4222"},
		{"bob:s3cret@h:4222", "xxxxx@h:4222"},
		{"nats://bob:p%zz@h", "nats://xxxxx@h"},
		{"nats://user:s3:cret@h:4222,nats://u2:t0p@h2:4222/", "nats://user:xxxxx@h:4222,nats://u2:xxxxx@h2:4222/"},
		{"redis://bob:s3cret@h:6379/1", "redis://bob:xxxxx@h:6379/1"},
		{"rediss://:s3cret@h:6379", "rediss://:xxxxx@h:6379"},
		{"redis://s3cret@h:6379", "redis://xxxxx@h:6379"},
		{"redis://h:6379/0?password=s3cret", "redis://h:6379/0?password=xxxxx"},
		{"redis://user:s3:ss@h:6379/?x=1#frag", "redis://user:xxxxx@h:6379/?x=1#frag"},
		{"amqp://bob:s3cret@h:5672/vhost", "amqp://bob:xxxxx@h:5672/vhost"},
		{"amqps://bob@h/", "amqps://bob@h/"},
		{"amqp://bob:p%zz@h/", "amqp://xxxxx@h/"},
		{"mqtt://user:s3cret@127.0.0.1:1883", "mqtt://user:xxxxx@127.0.0.1:1883"},
		{"mqtt://user:s3cret@[::1", "mqtt://xxxxx@[::1"},
		{"https://u:s3cret@hooks.example/in/{topic}", "https://u:xxxxx@hooks.example/in/{topic}"},
	} {
		if got := redact.URL(c.in); got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(redact.URL(c.in), "s3") || strings.Contains(redact.URL(c.in), "t0p") {
			t.Errorf("URL(%q) leaks the secret", c.in)
		}
	}
}

// TestError: a driver's error that echoes a secret of the connection
// string is cleaned, raw or percent-decoded, and still matches its cause.
func TestError(t *testing.T) {
	cause := errors.New("boom")
	for _, c := range []struct{ raw, msg, want string }{
		{"mysql://root:p%40ss@h/db", "access denied for root (using password p@ss)", "access denied for root (using password xxxxx)"},
		{"mysql://root:p%40ss@h/db", "bad dsn root:p%40ss@tcp(h)/db", "bad dsn root:xxxxx@tcp(h)/db"},
		{"nats://tok3n@h:4222,nats://u:pw9@h2", "auth tok3n / pw9 refused", "auth xxxxx / xxxxx refused"},
		{"redis://h/0?password=s3cret", "WRONGPASS s3cret", "WRONGPASS xxxxx"},
		{"redis://s3cret@h", "WRONGPASS s3cret", "WRONGPASS xxxxx"},
		{"u:s3cret@tcp(h:3306)/db", "dial u:s3cret@tcp", "dial xxxxx@tcp"},
		{"postgres://u:12/s3cret@h/x", "cannot parse 12/s3cret", "cannot parse xxxxx"},
		{"amqp://bob@h/", "bob is not allowed", "bob is not allowed"},
	} {
		err := redact.Error(fmt.Errorf("%s: %w", c.msg, cause), c.raw)
		if got := strings.TrimSuffix(err.Error(), ": boom"); got != c.want {
			t.Errorf("Error(%q, %q) = %q, want %q", c.msg, c.raw, got, c.want)
		}
		if !errors.Is(err, cause) {
			t.Errorf("Error(%q) lost its cause", c.msg)
		}
	}
	if redact.Error(nil, "nats://t@h") != nil {
		t.Error("nil must stay nil")
	}
	if err := redact.Error(cause, "nats://t0k@h"); err != cause {
		t.Errorf("an error without a secret must come back as it is: %v", err)
	}
}

// FuzzURL: URL never panics, and the password of any URL that
// url.Parse reads (raw or decoded) is not in the output, unless that text
// also appears elsewhere in the URL.
func FuzzURL(f *testing.F) {
	for _, s := range []string{
		"postgres://u:s3cret@127.0.0.1:5432/x?sslmode=disable",
		"mysql://root:p%40ss%3Aw0rd@tcp.example:3306/db?tls=true",
		"nats://u:s3cret@h1:4222,nats://v:t0p@h2:4222",
		"amqp://guest:guest@127.0.0.1:5672/",
		"redis://:pw@127.0.0.1:6379/0",
		"//u:pw@h",
		"postgres://u:p@ss@h/x",
		"postgres://u:pw@h/x?password=pw2#frag",
		"sqlite:///tmp/x.db",
		"host=h password=s3cret",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out := redact.URL(raw)
		u, err := url.Parse(raw)
		if err != nil || u.User == nil {
			return
		}
		pw, ok := u.User.Password()
		if !ok || pw == "" {
			return
		}
		// The password as written: between the userinfo's first ':' and
		// its last '@', in the authority after "//".
		i := strings.Index(raw, "//")
		if i < 0 {
			t.Fatalf("%q parsed with a password but has no //", raw)
		}
		auth := raw[i+2:]
		if j := strings.IndexAny(auth, "/?#"); j >= 0 {
			auth = auth[:j]
		}
		at := strings.LastIndex(auth, "@")
		colon := strings.Index(auth[:at], ":")
		rawPW := auth[colon+1 : at]
		start := i + 2 + colon + 1
		without := raw[:start] + raw[start+len(rawPW):]
		noPW := *u
		noPW.User = url.User(u.User.Username())
		seen := strings.ReplaceAll(out, "xxxxx", "\x00")
		for _, secret := range []string{pw, rawPW} {
			if secret == "" || strings.Contains(secret, "\x00") || strings.Contains(without, secret) || strings.Contains(noPW.String(), secret) {
				continue // the text is in the URL anyway, or cannot be told apart
			}
			// Redact re-encodes the rest of the URL: a short secret such as
			// "1" can appear inside an escape it wrote ("!" -> "%21").
			where := seen
			if !strings.Contains(secret, "%") {
				where = percentEscape.ReplaceAllString(seen, "\x00")
			}
			if strings.Contains(where, secret) {
				t.Fatalf("URL(%q) = %q shows the password %q", raw, out, secret)
			}
			// A driver's message that echoes the password is cleaned too.
			if strings.Contains(redact.Mask, secret) {
				continue
			}
			if msg := redact.String("cannot log in with "+secret, raw); strings.Contains(msg, secret) {
				t.Fatalf("String(%q, %q) = %q shows the password", "cannot log in with "+secret, raw, msg)
			}
		}
	})
}

var percentEscape = regexp.MustCompile(`%[0-9A-Fa-f]{2}`)

// TestText: every URL and DSN inside free text (an error message, a row's
// last error) has its secrets hidden, whatever surrounds it; the text
// around them is kept.
func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"dial postgres://app:pa/ss@db:5432/shop: connection refused", "dial postgres://xxxxx@db:5432/shop: connection refused"},
		{"nats: no servers available for connection: nats://s3cretToken@10.0.0.1:4222", "nats: no servers available for connection: nats://xxxxx@10.0.0.1:4222"},
		{"redis: dial redis://hunter2@cache:6379/0: i/o timeout", "redis: dial redis://xxxxx@cache:6379/0: i/o timeout"},
		{"Error 1045: open app:hunter2@tcp(127.0.0.1:3306)/shop failed", "Error 1045: open xxxxx@tcp(127.0.0.1:3306)/shop failed"},
		{`publish to "amqp://bob:s3cret@mq:5672/" refused (403)`, `publish to "amqp://bob:xxxxx@mq:5672/" refused (403)`},
		{"(postgres://u:s3cret@h/x), then mysql://root:t0psecret@h/db.", "(postgres://u:xxxxx@h/x), then mysql://root:xxxxx@h/db."},
		{"POST https://hooks.example/in?token=s3cret&x=1: 401", "POST https://hooks.example/in?token=xxxxx&x=1: 401"},
		{"connect host=db user=app password='s3 cret' dbname=x: refused", "connect host=db user=app password=xxxxx dbname=x: refused"},
		{"mail ops@example.com about order 12:30", "mail ops@example.com about order 12:30"},
		{"handler failed: ledger account 4711 closed", "handler failed: ledger account 4711 closed"},
	} {
		got := redact.Text(c.in)
		if got != c.want {
			t.Errorf("Text(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
		for _, secret := range []string{"pa/ss", "s3cret", "hunter2", "t0psecret", "s3 cret"} {
			if strings.Contains(got, secret) {
				t.Errorf("Text(%q) leaks %q: %q", c.in, secret, got)
			}
		}
	}
}
