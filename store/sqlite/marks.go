package sqlite

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// The relay's marks: each one fenced statement (queries/mark_*.sql,
// release.sql), its own short write transaction.

func (s *Store) MarkSent(ctx context.Context, lease string, ids []int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var n int64
	var err error
	if s.q.deleteSent {
		n, err = s.exec(ctx, "mark sent", s.q.markSent, idsJSON(ids), lease)
	} else {
		n, err = s.exec(ctx, "mark sent", s.q.markSent, idsJSON(ids), lease, micros(s.now()))
	}
	return n, refused(err)
}

type failureJSON struct {
	ID    int64  `json:"id"`
	Dead  int    `json:"dead"`
	Delay int64  `json:"delay"` // microseconds
	Err   string `json:"err"`
	Spend int32  `json:"spend"` // attempts spent: 0 for an outage
}

func (s *Store) MarkFailed(ctx context.Context, lease string, fs []store.Failure) (int64, error) {
	if len(fs) == 0 {
		return 0, nil
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(',')
		}
		dead := 0
		if f.Dead {
			dead = 1
		}
		if err := appendJSON(&b, failureJSON{ID: f.ID, Dead: dead, Delay: max(f.Delay, 0).Microseconds(), Err: sqlstore.Truncate(f.Error, 2000), Spend: f.Spends()}); err != nil {
			return 0, err
		}
	}
	b.WriteByte(']')
	return s.exec(ctx, "mark failed", s.q.markFailed, b.String(), lease, micros(s.now()))
}

func appendJSON(b *strings.Builder, v any) error {
	j, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b.Write(j)
	return nil
}

func (s *Store) Release(ctx context.Context, lease string, ids []int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	return s.exec(ctx, "release", s.q.release, idsJSON(ids), lease, micros(s.now()))
}
