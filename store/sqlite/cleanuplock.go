package sqlite

import (
	"context"
	"fmt"
	"sync"

	"github.com/txbox/txbox/store"
)

// LockCleanup implements store.CleanupLocker. SQLite has no session locks,
// so the lock is the operating system's on a file beside the database
// (<database>-txbox-cleanup; flock where there is one), which a process
// that dies gives up with its descriptors; an in-memory database, which
// no other process can open, takes turns within this process. The deletes
// run as Store.CleanupBatch and InboxCleanupBatch do: SQLite writes one
// transaction at a time anyway, and the lock keeps whole cleanups apart.
func (s *Store) LockCleanup(ctx context.Context) (store.Cleaner, bool, error) {
	var file string
	rows, err := s.db.QueryContext(ctx, "PRAGMA database_list")
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: cleanup lock: %w", err)
	}
	for rows.Next() {
		var seq int
		var name, path string
		if err := rows.Scan(&seq, &name, &path); err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("sqlite: cleanup lock: %w", err)
		}
		if name == "main" {
			file = path
		}
	}
	if err := rows.Close(); err != nil {
		return nil, false, fmt.Errorf("sqlite: cleanup lock: %w", err)
	}
	var unlock func()
	if file == "" {
		unlock = lockInProcess(fmt.Sprintf("%p", s.db))
	} else {
		unlock, err = lockFile(file + "-txbox-cleanup")
		if err != nil {
			return nil, false, fmt.Errorf("sqlite: cleanup lock: %w", err)
		}
	}
	if unlock == nil {
		return nil, false, nil
	}
	return cleaner{Store: s, unlock: unlock}, true, nil
}

type cleaner struct {
	*Store
	unlock func()
}

func (c cleaner) Unlock() { c.unlock() }

// held are the locks taken by lockInProcess.
var held sync.Map

// lockInProcess takes the lock named key within this process; nil when it
// is held.
func lockInProcess(key string) (unlock func()) {
	if _, taken := held.LoadOrStore(key, true); taken {
		return nil
	}
	return func() { held.Delete(key) }
}
