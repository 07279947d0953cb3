package conversion

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/crdserver/crdserver/internal/store"
)

// counting converts by rewriting apiVersion and counts the objects it saw.
type counting struct {
	mu sync.Mutex
	n  int
}

func (c *counting) Convert(ctx context.Context, objs [][]byte, to string) (Result, error) {
	c.mu.Lock()
	c.n += len(objs)
	c.mu.Unlock()
	return None{}.Convert(ctx, objs, to)
}

func cachedItems(t *testing.T, n int) []*store.Item {
	t.Helper()
	// Items of a cache have a memo: make them through a real cache of a
	// store is heavy here, so build them as the cache would.
	var out []*store.Item
	for i := 0; i < n; i++ {
		out = append(out, store.NewCachedItem(&store.Item{Key: fmt.Sprint(i), Raw: []byte(fmt.Sprintf(`{"apiVersion":"g/v1","kind":"K","metadata":{"name":"o%d"}}`, i))}))
	}
	return out
}

func TestItemsSharesConversions(t *testing.T) {
	ctx := context.Background()
	conv := &counting{}
	items := cachedItems(t, 3)
	for round := 0; round < 3; round++ {
		out, err := Items(ctx, conv, items, "g/v2")
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range out {
			if want := fmt.Sprintf(`{"apiVersion":"g/v2","kind":"K","metadata":{"name":"o%d"}}`, i); string(o) != want {
				t.Fatalf("round %d item %d: %s", round, i, o)
			}
		}
	}
	if conv.n != 3 {
		t.Fatalf("converted %d objects for 3 rounds of 3, want 3 (remembered)", conv.n)
	}
	// Objects already in the version are remembered as such, without a copy.
	if _, err := Items(ctx, conv, items, "g/v1"); err != nil {
		t.Fatal(err)
	}
	if r, ok := lookup(items[0], conv, "g/v1"); !ok || r.raw != nil {
		t.Fatalf("same-version conversion remembered as %+v %v", r, ok)
	}
	// Readers of another converter do not see these conversions.
	other := &counting{}
	if _, err := Items(ctx, other, items, "g/v2"); err != nil || other.n != 3 {
		t.Fatalf("another converter converted %d (%v)", other.n, err)
	}
}

func TestMemoKeepsRecentVersions(t *testing.T) {
	conv := &counting{}
	it := cachedItems(t, 1)[0]
	for i := 0; i <= maxRemembered; i++ {
		remember(it, conv, fmt.Sprintf("v%d", i), []byte{byte(i)}, nil)
	}
	if _, ok := lookup(it, conv, "v0"); ok {
		t.Fatal("the oldest version is still remembered")
	}
	for i := 1; i <= maxRemembered; i++ {
		if r, ok := lookup(it, conv, fmt.Sprintf("v%d", i)); !ok || r.raw[0] != byte(i) {
			t.Fatalf("v%d forgotten or wrong: %+v", i, r)
		}
	}
	remember(it, conv, "v2", []byte("again"), nil)
	if r, _ := lookup(it, conv, "v2"); string(r.raw) != "again" {
		t.Fatalf("v2 not replaced: %+v", r)
	}
	// Items outside a cache remember nothing.
	free := &store.Item{}
	remember(free, conv, "v1", nil, nil)
	if _, ok := lookup(free, conv, "v1"); ok {
		t.Fatal("an item outside a cache remembered")
	}
}

func TestNoneReportsWhatChanged(t *testing.T) {
	in := [][]byte{[]byte(`{"apiVersion":"g/v1"}`), []byte(`{"apiVersion":"g/v2"}`)}
	res, err := None{}.Convert(context.Background(), in, "g/v2")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed[0] || res.Changed[1] || string(res.Objects[0]) != `{"apiVersion":"g/v2"}` || &res.Objects[1][0] != &in[1][0] {
		t.Fatalf("None: %+v", res)
	}
	res, _ = None{}.Convert(context.Background(), in[1:], "g/v2")
	if res.Changed != nil {
		t.Fatalf("nothing to do, yet changed %v", res.Changed)
	}
}

// TestItemsSplitAcrossCPUs: a list big enough is converted in parts on
// several goroutines, with the same objects, in the same order, as one
// batch converts them; what was converted is remembered.
func TestItemsSplitAcrossCPUs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	ctx := context.Background()
	objs := benchObjects(3 * splitMin)
	for name, conv := range benchConverters(t) {
		want, err := conv.Convert(ctx, objs, "example.com/v1")
		if err != nil {
			t.Fatal(err)
		}
		items := make([]*store.Item, len(objs))
		for i, o := range objs {
			items[i] = store.NewCachedItem(&store.Item{Key: fmt.Sprint(i), Raw: o})
		}
		got, err := Items(ctx, conv, items, "example.com/v1")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want.Objects) {
			t.Fatalf("%s: %d objects, want %d", name, len(got), len(want.Objects))
		}
		for i := range got {
			if !bytes.Equal(got[i], want.Objects[i]) {
				t.Fatalf("%s: object %d:\n%s\nwant\n%s", name, i, got[i], want.Objects[i])
			}
		}
		for i := range items {
			if _, ok := lookup(items[i], conv, "example.com/v1"); !ok {
				t.Fatalf("%s: object %d's conversion not remembered", name, i)
			}
		}
	}
}
