// Package budget holds values that are built when first needed and may be
// built again, within a bound on their memory: what a server builds to
// serve a CRD (compiled schemas, CEL programs, type converters, OpenAPI
// documents) costs memory only while it is used, and a platform that
// installs thousands of CRDs and uses few of them pays for the few.
//
// A Pool has a limit in estimated bytes; a Value belongs to a pool and is
// built by its function on the first Get, which also says what it costs.
// When the pool's values cost more than its limit, the least recently used
// are released, and the next Get of one builds it again:
//
//	pool := budget.New(256 << 20)
//	v := budget.NewValue(pool, func() (*Compiled, int64, error) {
//		c, err := compile(src)
//		return c, c.Size(), err
//	})
//	c, err := v.Get() // built once; again only after a release
//
// Drop releases a value at once, when what it was built from is gone.
package budget
