package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/console"
	"github.com/txbox/txbox/store"
)

// What a hostile producer (or a broker's error text) may write into rows.
const (
	script = `<script>alert(1)</script>`
	img    = `"><img src=x onerror=alert(2)>`
)

// Everything a producer wrote is shown as text on every page and store:
// markup is escaped, control characters become control pictures, and a
// password quoted in an error never appears.
func TestXSS(t *testing.T) {
	eachStore(t, func(t *testing.T, h harness, s store.Store) {
		c := newConsole(t, s, console.Options{})
		e := txbox.Event{
			ID:            `"><img src=x onerror=alert(3)>` + "\x1b",
			Type:          script + "\x07bell",
			AggregateType: img,
			AggregateID:   "agg\x1b[31mred\r\n",
			Headers:       map[string]string{"x-evil" + script: img + "\x1b"},
			Payload:       []byte(`{"html":"` + strings.ReplaceAll(script, "/", `\/`) + `","attr":"\"><img src=x onerror=alert(4)>","ctl":"\u001b[2J"}`),
		}
		write(t, h, s, e)
		kill(t, s, script+" "+img+" \x1b[2J\x08 dial postgres://app:hunter2@db:5432/x failed")
		pe := e
		pe.ID = "parked-" + img
		park(t, h, s, "consumer"+script, pe, img+"\x1b"+" amqp://guest:hunter2@mq/")

		pages := []string{
			"/", "/dead", "/dead?" + q("error", script), "/dead/event?" + q("id", e.ID),
			"/dead/confirm?" + q("action", "purge", "event_type", e.Type),
			"/find?" + q("id", e.ID), "/find?" + q("id", pe.ID),
			"/inbox", "/inbox?" + q("consumer", "consumer"+script),
			"/inbox/event?" + q("consumer", "consumer"+script, "id", pe.ID),
			"/inbox/confirm?" + q("consumer", "consumer"+script),
			"/dead/event?" + q("id", script+"\x1b"), // a 404 quoting the id
		}
		for _, p := range pages {
			w := do(t, c, req{path: p})
			body := w.Body.String()
			if w.Code != http.StatusOK && w.Code != http.StatusNotFound {
				t.Fatalf("GET %s: %d\n%s", p, w.Code, body)
			}
			for _, raw := range []string{"<script", "<img", "\x1b", "\x07", "\x08", "hunter2"} {
				if strings.Contains(body, raw) {
					t.Fatalf("GET %s shows %q unescaped:\n%s", p, raw, body)
				}
			}
		}
		// And it is there, as text.
		page := get(t, c, "/dead/event?"+q("id", e.ID))
		for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;", "\u241b", "\u2407bell", "xxxxx@db"} {
			if !strings.Contains(page, want) {
				t.Fatalf("details page lacks %q:\n%s", want, page)
			}
		}
		page = get(t, c, "/dead")
		for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "agg\u241b[31mred\u240d\u240a"} {
			if !strings.Contains(page, want) {
				t.Fatalf("list page lacks %q:\n%s", want, page)
			}
		}
		// The API is JSON: markup is \u003c-escaped, passwords redacted.
		for _, p := range []string{"/api/dead", "/api/dead/event?" + q("id", e.ID), "/api/inbox", "/api/inbox/event?" + q("consumer", "consumer"+script, "id", pe.ID), "/api/find?" + q("id", e.ID)} {
			w := do(t, c, req{path: p})
			body := w.Body.String()
			if w.Code != http.StatusOK || strings.Contains(body, "<script") || strings.Contains(body, "<img") || strings.Contains(body, "hunter2") {
				t.Fatalf("GET %s: %d\n%s", p, w.Code, body)
			}
		}
	})
}
