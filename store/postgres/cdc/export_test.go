package cdc

// Reading reports whether the relay reads its slot now (not a standby, not
// between connections).
func (r *Reader) Reading() bool { return r.reading.Load() }
