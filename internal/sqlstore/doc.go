// Package sqlstore holds what the SQL stores (store/postgres, store/mysql,
// store/sqlite) share and users of package store need not see: the shape
// of multi-row INSERTs and the prepared outbox dialect, filters as WHERE
// clauses, migrations as templates, the stored form of headers and text.
// Package store keeps only the contract.
package sqlstore
