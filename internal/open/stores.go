package open

import (
	"context"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/mysql"
	"github.com/txbox/txbox/store/sqlite"
)

func init() {
	extraStores["mysql"] = func(ctx context.Context, raw string, o StoreOptions) (store.Store, error) {
		return mysql.Open(ctx, raw, mysql.Options{Tables: o.Tables, DeleteSent: o.DeleteSent, Logger: o.Logger})
	}
	extraStores["sqlite"] = func(ctx context.Context, raw string, o StoreOptions) (store.Store, error) {
		return sqlite.Open(ctx, raw, sqlite.Options{Tables: o.Tables, DeleteSent: o.DeleteSent, Logger: o.Logger})
	}
}
