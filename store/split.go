package store

import "context"

// Splitter is a store whose relays can split the aggregates of one outbox
// table between them. Two relay processes that claim from one backlog
// otherwise meet each other's rows in flight in every claim and skip them
// one by one; with few hot aggregates they spend more time claiming than
// the second process adds.
//
// Split makes this store's claims take only their share of the aggregates
// for as long as other stores of the table are split too: the members
// divide the aggregates between them, and a member that leaves (or dies,
// or loses its connection) hands its share to the others at their next
// claim. The split only chooses which rows each claim looks at; the claim
// contract (order, one holder per row) holds whatever each member believes
// about the others. leave ends the membership; each Split needs one leave.
//
// Not stable, do not implement: this is the relay's interface to the
// PostgreSQL store, and it changes with the claim protocol; the contract
// stores outside this module implement is Store (and Outbox).
type Splitter interface {
	Split(ctx context.Context) (leave func(), err error)
}
