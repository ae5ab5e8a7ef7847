package postgres

import "time"

// InboxKey is inboxKey, for the plan test.
const InboxKey = inboxKey

// SetFloorTiming shortens the floor's waits for tests.
func SetFloorTiming(s *Store, gap, rescan time.Duration) {
	s.floor.mu.Lock()
	defer s.floor.mu.Unlock()
	s.floor.gap, s.floor.every = gap, rescan
}

// Floor is the floor the next claim would start from.
func Floor(s *Store) int64 {
	s.floor.mu.Lock()
	defer s.floor.mu.Unlock()
	return s.floor.safe
}
