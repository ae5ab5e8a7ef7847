package mysql_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store/mysql"
)

// FuzzParseDSN: the mysql:// URL -> DSN converter never panics; an error is
// a one-line *txbox.ConfigError naming --db that does not contain the
// password (raw or escaped) unless the same text is in the error for the
// same URL with another password; an accepted URL keeps user and password
// exactly.
func FuzzParseDSN(f *testing.F) {
	f.Add("root", "s3cret", "127.0.0.1:3306", "test", "tls=false")
	f.Add("u", "p@ss:w/rd?#%", "db.example", "shop", "timeout=5s&charset=utf8mb4")
	f.Add("u", "s3cret", "[::1]:3306", "", "")
	f.Add("u", "s3cret", "h:99999", "x", "timeout=soon")
	f.Add("", "", "", "x/y", "socket=/run/mysqld.sock")
	f.Add("u", "%zz", "h", "x", "%zz")
	f.Add("u", "invalid", "h", "x", "tls=bogus")
	f.Fuzz(func(t *testing.T, user, pass, host, db, query string) {
		build := func(pw string) string {
			return "mysql://" + url.UserPassword(user, pw).String() + "@" + host + "/" + db + "?" + query
		}
		raw := build(pass)
		cfg, err := mysql.Config(raw)
		dsn, dsnErr := mysql.DSN(raw)
		if (err == nil) != (dsnErr == nil) {
			t.Fatalf("Config err %v, DSN err %v", err, dsnErr)
		}
		if err == nil {
			if u, perr := url.Parse(raw); perr == nil && u.User != nil {
				pw, _ := u.User.Password()
				if cfg.User != u.User.Username() || cfg.Passwd != pw {
					t.Fatalf("%q: user %q password %q, want %q %q", raw, cfg.User, cfg.Passwd, u.User.Username(), pw)
				}
			}
			if dsn == "" {
				t.Fatalf("%q: empty DSN", raw)
			}
			return
		}
		var ce *txbox.ConfigError
		if !errors.As(err, &ce) || ce.Field != "--db (TXBOX_DB)" || strings.ContainsAny(err.Error(), "\r\n") {
			t.Fatalf("%q: error %q is not a one-line config error naming --db", raw, err)
		}
		otherMsg := ""
		if _, oerr := mysql.Config(build("PLACEHOLDER")); oerr != nil {
			otherMsg = oerr.Error()
		}
		for _, secret := range []string{pass, url.UserPassword("", pass).String()[1:]} {
			if secret == "" || strings.Contains(otherMsg, secret) || strings.Contains(build(""), secret) {
				continue // the text is in the error or the URL anyway
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error for %q shows the password %q: %v", raw, secret, err)
			}
		}
	})
}
