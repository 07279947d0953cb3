package resource

import (
	"context"
	"sync"
)

// A request's memo lets a strategy keep what it derived from an object
// for the rest of the request: its validation and its warnings, called
// one after the other on the same object, decode it once.

type memoKey struct{}

type requestMemo struct {
	mu sync.Mutex
	m  map[any]any
}

// withMemo gives ctx a request memo.
func withMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, memoKey{}, &requestMemo{m: map[any]any{}})
}

// Memo returns what build makes for key, made once in the request of ctx
// (a ctx of the engine's); outside a request it is made every call. The
// key must identify what the value is derived from as it is then: a
// strategy keys it by the object and its content map, which its own
// preparation replaces when it changes the object.
func Memo[T any](ctx context.Context, key any, build func() T) T {
	rm, _ := ctx.Value(memoKey{}).(*requestMemo)
	if rm == nil {
		return build()
	}
	rm.mu.Lock()
	v, ok := rm.m[key]
	rm.mu.Unlock()
	if ok {
		return v.(T)
	}
	made := build()
	rm.mu.Lock()
	rm.m[key] = made
	rm.mu.Unlock()
	return made
}
