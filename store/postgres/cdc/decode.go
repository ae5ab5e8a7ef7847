package cdc

import (
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres/internal/cdcstore"
)

// change is one event of the stream: a row (from an INSERT, or an UPDATE
// that made a row PENDING again: a replay) or a tableless event (a logical
// decoding message). A row whose values the log left out is read by id.
type change struct {
	rec     store.Record
	err     error // the event can never be published (it wraps txbox.ErrPermanent)
	message bool  // tableless: a DEAD copy is inserted, nothing is archived
	fetch   bool  // row whose payload or headers were not in the log
}

// decoder turns pgoutput messages into changes; it keeps the relation
// descriptions the stream sends before a table's first row.
type decoder struct {
	schema, table string // the outbox table; schema "" is matched as "public"
	prefix        string // of tableless events
	relations     map[uint32]*pglogrepl.RelationMessage
	types         *pgtype.Map
}

func newDecoder(t store.Tables) *decoder {
	t = t.WithDefaults()
	return &decoder{schema: t.Schema, table: t.Outbox, prefix: cdcstore.MessagePrefix(t),
		relations: map[uint32]*pglogrepl.RelationMessage{}, types: pgtype.NewMap()}
}

func (d *decoder) ours(rel *pglogrepl.RelationMessage) bool {
	if rel.RelationName != d.table {
		return false
	}
	return d.schema == "" || rel.Namespace == d.schema
}

// tuple decodes a row; ok is false for a row that is not ours to deliver
// (another table, or a status other than PENDING: a DEAD row the relay
// itself stored, a row a polling relay holds).
func (d *decoder) tuple(relID uint32, tup *pglogrepl.TupleData) (change, bool) {
	rel, known := d.relations[relID]
	if !known || tup == nil || !d.ours(rel) {
		return change{}, false
	}
	var c change
	r := &c.rec
	var status string
	for i, col := range tup.Columns {
		if i >= len(rel.Columns) {
			break
		}
		name := rel.Columns[i].Name
		if col.DataType == pglogrepl.TupleDataTypeToast {
			c.fetch = true
			continue
		}
		if col.DataType == pglogrepl.TupleDataTypeNull {
			continue
		}
		v := col.Data
		var err error
		switch name {
		case "id":
			err = d.scan(rel.Columns[i].DataType, v, &r.ID)
		case "event_id":
			r.EventID = string(v)
		case "aggregate_type":
			r.AggregateType = string(v)
		case "aggregate_id":
			r.AggregateID = string(v)
		case "aggregate_version":
			err = d.scan(rel.Columns[i].DataType, v, &r.AggregateVersion)
		case "event_type":
			r.EventType = string(v)
		case "payload":
			r.Payload = append([]byte(nil), v...)
		case "headers":
			r.Headers = append([]byte(nil), v...)
		case "status":
			status = string(v)
		case "retry_count":
			var n int64
			err = d.scan(rel.Columns[i].DataType, v, &n)
			r.RetryCount = int(n)
		case "occurred_at":
			err = d.scan(rel.Columns[i].DataType, v, &r.OccurredAt)
		case "created_at":
			err = d.scan(rel.Columns[i].DataType, v, &r.CreatedAt)
		}
		if err != nil && c.err == nil {
			c.err = txbox.Permanent(fmt.Errorf("%w: column %s: %v", txbox.ErrInvalidEvent, name, err))
		}
	}
	r.Status = txbox.Status(status)
	if status != string(txbox.StatusPending) || r.ID == 0 {
		return change{}, false
	}
	return c, true
}

func (d *decoder) scan(oid uint32, v []byte, dst any) error {
	return d.types.Scan(oid, pgtype.TextFormatCode, v, dst)
}

// message decodes a logical decoding message; ok is false for one that is
// not a tableless event of this outbox.
func (d *decoder) message(m *pglogrepl.LogicalDecodingMessage, commitTime time.Time) (change, bool) {
	if m.Prefix != d.prefix || !m.Transactional {
		return change{}, false
	}
	rec, err := cdcstore.DecodeMessage(m.Content, commitTime)
	if rec.ID == 0 {
		// Without an id it cannot even be stored as DEAD; it is skipped,
		// loudly (the caller logs it).
		return change{rec: rec, err: err, message: true}, err != nil
	}
	return change{rec: rec, err: err, message: true}, true
}
