// Package sqladmin is the reading the SQL stores' operator statements
// share (Stats, Backlog, Count and the cleanup counts): rows of counts by
// status, and one count. The statements are each store's; how their rows
// become store values is here, once.
package sqladmin

import (
	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// Rows is what *sql.Rows and pgx.Rows have in common.
type Rows = sqlstore.Rows

// StatusCounts reads rows of (status, count), adding up the counts of a
// status that comes twice (a hot table and its archive) and leaving out
// zero counts (an empty archive).
func StatusCounts(rows Rows) (map[txbox.Status]int64, error) {
	counts := map[txbox.Status]int64{}
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			return nil, err
		}
		if n > 0 {
			counts[txbox.Status(status)] += n
		}
	}
	return counts, rows.Err()
}

// Backlog is the backlog of counts by status (StatusCounts); the caller
// adds OldestAge.
func Backlog(counts map[txbox.Status]int64) store.Backlog {
	return store.Backlog{
		Pending:    counts[txbox.StatusPending],
		Retry:      counts[txbox.StatusRetry],
		Processing: counts[txbox.StatusProcessing],
		Dead:       counts[txbox.StatusDead],
	}
}
