package sqlstore_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// TestFilterSQL: every field of a filter becomes one condition, in a fixed
// order, numbered from firstArg; an empty filter matches all.
func TestFilterSQL(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	where, args := sqlstore.FilterSQL(store.Filter{Status: txbox.StatusDead, EventIDs: []string{"a", "b"}, AggregateType: "Order",
		AggregateID: "7", EventType: "Created", Since: since, Until: since.Add(time.Hour)}, dollar, 2)
	want := "status = $2 AND event_id IN ($3, $4) AND aggregate_type = $5 AND aggregate_id = $6 AND event_type = $7 AND created_at >= $8 AND created_at < $9"
	if where != want {
		t.Fatalf("where =\n%s\nwant\n%s", where, want)
	}
	wantArgs := []any{"DEAD", "a", "b", "Order", "7", "Created", since.UTC(), since.Add(time.Hour).UTC()}
	if !reflect.DeepEqual(args, wantArgs) {
		t.Fatalf("args = %v, want %v", args, wantArgs)
	}
	if where, args := sqlstore.FilterSQL(store.Filter{}, dollar, 1); where != "1=1" || args != nil {
		t.Fatalf("empty filter: %q %v", where, args)
	}

	where, args = sqlstore.InboxFilterSQL(store.InboxFilter{Consumer: "c", Status: txbox.StatusDead, EventIDs: []string{"e"}, Since: since}, dollar, 1)
	if want := "consumer_name = $1 AND status = $2 AND event_id IN ($3) AND received_at >= $4"; where != want {
		t.Fatalf("inbox where = %q, want %q", where, want)
	}
	if len(args) != 4 || args[3] != since.UTC() {
		t.Fatalf("inbox args = %v", args)
	}
	if got := sqlstore.TimesAs([]any{"x", since}, func(t time.Time) any { return t.Unix() }); got[1] != since.Unix() || got[0] != "x" {
		t.Fatalf("TimesAs = %v", got)
	}
}
