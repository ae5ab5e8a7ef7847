// Package redact hides the secrets of connection strings in logs and error
// messages: database URLs and DSNs, broker URLs and NATS server lists. It is
// the one place that knows where a secret may stand in such a string, so
// every adapter and the CLI hide the same things the same way.
package redact

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Mask is what a secret is replaced with.
const Mask = "xxxxx"

var (
	// urlStartRE finds where each URL of a list starts.
	urlStartRE = regexp.MustCompile(`(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//`)
	// secretParamRE is a password-like key and its value, in a query
	// string or a key=value DSN.
	secretParamRE = regexp.MustCompile(`(?i)(^|[?&;\s,])((?:[a-z0-9_.\-]*(?:password|passwd|pwd|secret|token|api_?key)|pass)\s*=\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^&\s,;#]*)`)
	// tokenSchemes read a lone user part as a secret: a NATS token
	// (nats://token@host), a Redis password (go-redis reads
	// redis://secret@host so).
	tokenSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true, "redis": true, "rediss": true}
)

// URL hides the secrets of a URL, a comma-separated list of URLs (NATS
// server lists) or a key=value DSN: the password of every URL, a lone user
// part where the scheme reads it as a secret (nats://token@host,
// redis://password@host), and the value of every password-like parameter
// (?password=..., ?token=..., sslpassword=..., password='...' in a DSN)
// become "xxxxx". Where a URL does not parse, or has an '@' that url.Parse
// does not read as userinfo, everything between "://" and the last '@' is
// hidden; in a string that is no URL at all (a driver DSN such as
// user:password@tcp(host)/db), everything before the last '@' is.
func URL(raw string) string {
	var b strings.Builder
	prev := 0
	locs := urlStartRE.FindAllStringIndex(raw, -1)
	for i, loc := range locs {
		end := len(raw)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		b.WriteString(raw[prev:loc[0]])
		b.WriteString(oneURL(raw[loc[0]:end]))
		prev = end
	}
	b.WriteString(raw[prev:])
	out := b.String()
	if len(locs) == 0 {
		if at := strings.LastIndex(out, "@"); at >= 0 {
			out = Mask + out[at:]
		}
	}
	return secretParamRE.ReplaceAllString(out, "${1}${2}"+Mask)
}

// Text hides the secrets of every URL and DSN that free text quotes: an
// error message or a row's last error, which may name the database or
// broker an attempt failed to reach. Each run of non-space characters that
// holds "://" is redacted as URL does; one that holds no scheme but a
// user:password before an '@' (a driver DSN, user:pw@tcp(host)/db) has
// everything before its last '@' hidden; password-like parameters are
// hidden anywhere. Quotes, brackets and punctuation around a URL stay.
func Text(s string) string {
	s = wordRE.ReplaceAllStringFunc(s, textWord)
	return secretParamRE.ReplaceAllString(s, "${1}${2}"+Mask)
}

var wordRE = regexp.MustCompile(`\S+`)

func textWord(w string) string {
	lead := len(w) - len(strings.TrimLeft(w, "\"'`(<["))
	core := strings.TrimRight(w[lead:], "\"'`),.;:>]")
	tail := w[lead+len(core):]
	switch {
	case strings.Contains(core, "://"):
		core = URL(core)
	default:
		if at := strings.LastIndex(core, "@"); at > 0 && strings.Contains(core[:at], ":") {
			core = Mask + core[at:]
		}
	}
	return w[:lead] + core + tail
}

// oneURL redacts one URL of a list; separators after it are kept.
func oneURL(seg string) string {
	body := strings.TrimRight(seg, ", \t")
	tail := seg[len(body):]
	start := strings.Index(body, "//") + 2
	u, err := url.Parse(body)
	if err != nil || (u.User == nil && strings.Contains(body[start:], "@")) {
		if at := strings.LastIndex(body, "@"); at >= start {
			return body[:start] + Mask + body[at:] + tail
		}
		return seg
	}
	if u.User == nil {
		return seg
	}
	// Only the userinfo as written is replaced; the rest stays verbatim
	// (re-encoding would turn a webhook's {topic} into %7Btopic%7D).
	written := userinfo(body[start:])
	var user string
	if _, has := u.User.Password(); has {
		name, _, _ := strings.Cut(written, ":")
		user = name + ":" + Mask
	} else if tokenSchemes[strings.ToLower(u.Scheme)] {
		user = Mask
	} else {
		return seg
	}
	return body[:start] + user + body[start+len(written):] + tail
}

// userinfo is the userinfo of an authority as written: up to its last '@'
// (url.Parse reads the authority up to the first '/', '?' or '#').
func userinfo(rest string) string {
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		rest = rest[:j]
	}
	return rest[:max(strings.LastIndex(rest, "@"), 0)]
}

// Secrets lists the secrets URL hides in raw, as written and, where that
// differs, percent-decoded: the text a driver may echo in an error.
func Secrets(raw string) []string {
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		if dec, err := url.PathUnescape(s); err == nil && dec != s && dec != "" {
			out = append(out, dec)
		}
	}
	// hidden adds a userinfo URL hides whole, and its password part alone,
	// which is what a driver is likeliest to echo.
	hidden := func(userinfo string) {
		add(userinfo)
		if _, pw, ok := strings.Cut(userinfo, ":"); ok {
			add(pw)
		}
	}
	locs := urlStartRE.FindAllStringIndex(raw, -1)
	if len(locs) == 0 {
		if at := strings.LastIndex(raw, "@"); at >= 0 {
			hidden(raw[:at])
		}
	}
	for i, loc := range locs {
		end := len(raw)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		body := strings.TrimRight(raw[loc[0]:end], ", \t")
		start := strings.Index(body, "//") + 2
		u, err := url.Parse(body)
		if err != nil || (u.User == nil && strings.Contains(body[start:], "@")) {
			if at := strings.LastIndex(body, "@"); at >= start {
				hidden(body[start:at])
			}
			continue
		}
		if u.User == nil {
			continue
		}
		written := userinfo(body[start:])
		if pw, has := u.User.Password(); has {
			add(pw)
			if _, w, ok := strings.Cut(written, ":"); ok {
				add(w)
			}
		} else if tokenSchemes[strings.ToLower(u.Scheme)] {
			add(u.User.Username())
			add(written)
		}
	}
	for _, m := range secretParamRE.FindAllStringSubmatch(raw, -1) {
		v := m[3]
		if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') {
			v = v[1 : len(v)-1]
		}
		add(v)
	}
	// Longest first, so that a secret inside another is not replaced
	// before the one that holds it.
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// String returns msg with every secret of raw (see Secrets) replaced by
// "xxxxx": for a driver's message that may echo the connection string.
func String(msg, raw string) string {
	for _, s := range Secrets(raw) {
		msg = strings.ReplaceAll(msg, s, Mask)
	}
	return msg
}

// Error returns err with every secret of raw blanked from its text;
// errors.Is and errors.As still see the original. It returns err itself
// when its text shows no secret.
func Error(err error, raw string) error {
	if err == nil {
		return nil
	}
	msg := String(err.Error(), raw)
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
