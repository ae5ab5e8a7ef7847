package open_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/txbox/txbox/internal/open"
)

func TestRedact(t *testing.T) {
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
	} {
		if got := open.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(open.Redact(c.in), "s3") || strings.Contains(open.Redact(c.in), "t0p") {
			t.Errorf("Redact(%q) leaks the secret", c.in)
		}
	}
}

// FuzzRedact: Redact never panics, and the password of any URL that
// url.Parse reads (raw or decoded) is not in the output, unless that text
// also appears elsewhere in the URL.
func FuzzRedact(f *testing.F) {
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
		out := open.Redact(raw)
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
				t.Fatalf("Redact(%q) = %q shows the password %q", raw, out, secret)
			}
		}
	})
}

var percentEscape = regexp.MustCompile(`%[0-9A-Fa-f]{2}`)
