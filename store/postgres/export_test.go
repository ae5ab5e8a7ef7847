package postgres

import "time"

// InboxKey is inboxKey, for the plan test.
const InboxKey = inboxKey

// SetFloorRescan sets how often the store looks below the floor, for tests.
func SetFloorRescan(s *Store, rescan time.Duration) {
	s.floor.mu.Lock()
	defer s.floor.mu.Unlock()
	s.floor.every = rescan
}

// Floor is the floor the next claim would start from.
func Floor(s *Store) int64 {
	s.floor.mu.Lock()
	defer s.floor.mu.Unlock()
	return s.floor.safe
}

// Fallbacks is the number of transaction claims that ran the fallback claim.
func Fallbacks(s *Store) int64 { return s.fallbacks.Load() }

// SplitMembers is the number of relays the store last counted on its table.
func SplitMembers(s *Store) int { return s.splitMembers() }

// ClaimAlone says whether the store's claims leave out the split and the
// busy check (the only member of its table's split).
func ClaimAlone(s *Store) bool { return s.claimAlone() }
