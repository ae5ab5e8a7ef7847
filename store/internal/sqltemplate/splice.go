package sqltemplate

import (
	"fmt"
	"strings"
)

// Hole stands, in the data of a statement rendered once, for the part
// that varies per call (an id list's placeholders). Spliced then puts each
// call's part in its place without executing the template again: the
// relay runs such statements on every claim and mark.
const Hole = "\x00txbox-hole\x00"

// Spliced is a statement rendered with Hole for its per-call part: the
// text around each place the part goes.
type Spliced struct{ parts []string }

// Splice renders file with data, in which the per-call field holds Hole.
// It panics when the statement has no Hole (the field is not in the
// statement), a bug each store's golden test shows.
func (s Set) Splice(file string, data any) Spliced {
	parts := strings.Split(s.Render(file, data), Hole)
	if len(parts) < 2 {
		panic(fmt.Sprintf("sqltemplate: %s: no hole in the rendered statement", file))
	}
	return Spliced{parts}
}

// With is the statement with part in the place of each Hole: one
// allocation, the statement's text.
func (p Spliced) With(part string) string {
	n := len(part) * (len(p.parts) - 1)
	for _, s := range p.parts {
		n += len(s)
	}
	var b strings.Builder
	b.Grow(n)
	for i, s := range p.parts {
		if i > 0 {
			b.WriteString(part)
		}
		b.WriteString(s)
	}
	return b.String()
}
