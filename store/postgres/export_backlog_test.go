package postgres

// BacklogSQL is the store's backlog statement, for the plan test.
func BacklogSQL(s *Store) string { return s.st.backlog }
