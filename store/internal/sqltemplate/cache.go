package sqltemplate

import "sync"

// Cache keeps the statements a store renders for one key, its table names:
// a Dialect is a value callers may build by hand and use on every
// delivery, so it renders its statements on first use and looks them up
// after that.
type Cache[K comparable, V any] struct {
	// Build renders the statements for a key, or says why the key is
	// refused (a table name that is not an identifier). It runs once per
	// key (twice at most under a race, one result kept).
	Build func(K) (V, error)
	m     sync.Map
}

type built[V any] struct {
	v   V
	err error
}

// Get returns the statements for k, rendering them the first time.
func (c *Cache[K, V]) Get(k K) (V, error) {
	b, ok := c.m.Load(k)
	if !ok {
		v, err := c.Build(k)
		b, _ = c.m.LoadOrStore(k, built[V]{v, err})
	}
	return b.(built[V]).v, b.(built[V]).err
}
