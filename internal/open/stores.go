package open

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/mysql"
	"github.com/txbox/txbox/store/sqlite"
)

func init() {
	extraStores["mysql"] = func(ctx context.Context, raw string, o StoreOptions) (store.Store, error) {
		return mysql.Open(ctx, raw, mysql.Options{Tables: o.Tables, DeleteSent: o.DeleteSent, Logger: o.Logger})
	}
	extraStores["sqlite"] = func(ctx context.Context, raw string, o StoreOptions) (store.Store, error) {
		if o.Existing {
			path := strings.TrimPrefix(raw, "sqlite://")
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				return nil, &txbox.ConfigError{Field: dbField, Reason: fmt.Sprintf("SQLite file %s does not exist: create it with `txbox migrate --db %s` (or start the relay with --migrate)", path, raw)}
			}
		}
		return sqlite.Open(ctx, raw, sqlite.Options{Tables: o.Tables, DeleteSent: o.DeleteSent, Logger: o.Logger})
	}
}
