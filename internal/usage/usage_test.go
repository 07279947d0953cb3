package usage

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crdserver/crdserver/internal/store"
)

func key(user, version string) Key {
	return Key{Group: "example.com", Version: version, Resource: "widgets", Verb: "list", User: user, UserAgent: "kubectl/v1.37.2"}
}

func TestRecorderCounts(t *testing.T) {
	r := NewRecorder(0, 0)
	clock := int64(1000)
	r.now = func() int64 { return clock }
	r.Record(key("alice", "v1beta1"))
	clock = 1005
	r.Record(key("alice", "v1beta1"))
	r.Record(key("bob", "v1"))
	got, over := r.Snapshot()
	want := []Entry{ // sorted by group, version, resource, user
		{Key: key("bob", "v1"), Count: 1, First: 1005, Last: 1005},
		{Key: key("alice", "v1beta1"), Count: 2, First: 1000, Last: 1005},
	}
	if !reflect.DeepEqual(got, want) || len(over) != 0 {
		t.Fatalf("snapshot:\n%+v\nwant\n%+v (overflow %v)", got, want, over)
	}
	// A known client's request allocates nothing.
	k := key("alice", "v1beta1")
	if n := testing.AllocsPerRun(100, func() { r.Record(k) }); n != 0 {
		t.Errorf("Record allocates %v times for a known client", n)
	}
}

func TestRecorderBounds(t *testing.T) {
	r := NewRecorder(2, 1)
	for i := range 5 {
		r.Record(key(fmt.Sprintf("user-%d", i), "v1beta1"))
	}
	r.Record(key("user-0", "v1beta1"))
	r.Record(key("other", "v1")) // another group/version has its own bound
	nf := key("x", "v0")
	nf.NotServed = true
	r.Record(nf)
	nf2 := nf
	nf2.Version = "v00" // a second unserved version of the resource: not told apart
	r.Record(nf2)
	got, over := r.Snapshot()
	counts := map[string]int64{}
	for _, e := range got {
		counts[e.Version+"/"+e.User] = e.Count
	}
	want := map[string]int64{"v0/x": 1, "v1/other": 1, "v1beta1/user-0": 2, "v1beta1/user-1": 1}
	if !reflect.DeepEqual(counts, want) || over["example.com/v1beta1"] != 3 {
		t.Fatalf("bounded: %v, overflow %v", counts, over)
	}
	// Forgotten clients make room again.
	r.now = func() int64 { return time.Now().Unix() + 3600 }
	r.Forget(time.Now().Unix() + 1)
	r.Record(key("late", "v1beta1"))
	if got, _ := r.Snapshot(); len(got) != 1 || got[0].User != "late" {
		t.Fatalf("after Forget: %+v", got)
	}
}

func TestRecorderConcurrent(t *testing.T) {
	r := NewRecorder(0, 0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				r.Record(key(fmt.Sprintf("user-%d", (g+i)%10), "v1"))
			}
		})
	}
	wg.Wait()
	got, _ := r.Snapshot()
	if digestOf(got).count != 8000 || len(got) != 10 {
		t.Fatalf("%d requests of %d clients", digestOf(got).count, len(got))
	}
}

func TestMerge(t *testing.T) {
	a := []Entry{{Key: key("alice", "v1"), Count: 2, First: 10, Last: 20}}
	b := []Entry{{Key: key("alice", "v1"), Count: 3, First: 5, Last: 15}, {Key: key("bob", "v1"), Count: 1, First: 7, Last: 7}}
	got := Merge(a, b)
	want := []Entry{{Key: key("alice", "v1"), Count: 5, First: 5, Last: 20}, {Key: key("bob", "v1"), Count: 1, First: 7, Last: 7}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merge: %+v", got)
	}
}

func startStore(t *testing.T) *store.Store {
	t.Helper()
	e, err := store.StartEmbedded(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return store.New(e.Client)
}

// Two replicas on one store: what one counted the other reports once it
// is written, and after a restart each replica goes on from its record.
func TestPersisterAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	st := startStore(t)
	clock := time.Now().Unix()
	replica := func(name string) *Persister {
		r := NewRecorder(0, 0)
		r.now = func() int64 { return clock }
		p := &Persister{Store: st, Recorder: r, Replica: name, Window: time.Hour, Interval: time.Minute}
		if err := p.Load(ctx); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := replica("a"), replica("b")
	a.Recorder.Record(key("alice", "v1beta1"))
	a.Recorder.Record(key("alice", "v1beta1"))
	if got, _, err := b.Clients(ctx); err != nil || len(got) != 0 {
		t.Fatalf("before A wrote: %+v %v", got, err)
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b.Recorder.Record(key("alice", "v1beta1"))
	got, _, err := b.Clients(ctx)
	if err != nil || len(got) != 1 || got[0].Count != 3 {
		t.Fatalf("B reports: %+v %v", got, err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Both restart: their records seed them.
	a2, b2 := replica("a"), replica("b")
	a2.Recorder.Record(key("alice", "v1beta1"))
	if err := a2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, _, err = b2.Clients(ctx)
	if err != nil || len(got) != 1 || got[0].Count != 4 {
		t.Fatalf("after restarts: %+v %v", got, err)
	}
	// Past the window, a client is forgotten, in memory and in the store.
	clock += 2 * 3600
	if got, _, _ := b2.Clients(ctx); len(got) != 0 {
		t.Fatalf("past the window: %+v", got)
	}
	if err := a2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := a2.Recorder.Snapshot(); len(got) != 0 {
		t.Fatalf("A still remembers: %+v", got)
	}
}

func TestReplicaID(t *testing.T) {
	dir := t.TempDir()
	a, err := ReplicaID(dir)
	if err != nil || a == "" {
		t.Fatal(a, err)
	}
	if b, _ := ReplicaID(dir); b != a {
		t.Fatalf("a second start is another replica: %s, %s", a, b)
	}
	if c, _ := ReplicaID(t.TempDir()); c == a {
		t.Fatal("two data folders share a replica id")
	}
}

// BenchmarkRecord is a known client's request: what every request pays.
func BenchmarkRecord(b *testing.B) {
	r := NewRecorder(0, 0)
	keys := make([]Key, 64)
	for i := range keys {
		keys[i] = key(fmt.Sprintf("system:serviceaccount:ns:controller-%d", i), "v1")
		r.Record(keys[i])
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.Record(keys[i%len(keys)])
			i++
		}
	})
}

// TestMemoryPerKnownClient states what a known client costs: the heap a
// Recorder holds per (resource, verb, user, user agent) it counts, with
// names as long as a ServiceAccount's and a client-go user agent.
func TestMemoryPerKnownClient(t *testing.T) {
	const n = 5000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := NewRecorder(0, 0)
	for i := range n {
		// The strings are made here, as a request's are: they are part of
		// what a client costs.
		r.Record(Key{Group: "apps.example.com", Version: fmt.Sprintf("v%d", i/DefaultMaxClients), Resource: "widgets", Verb: "list",
			User: fmt.Sprintf("system:serviceaccount:team-%d:controller", i), UserAgent: strings.Clone("manager/v0.0.0 (linux/amd64) kubernetes/$Format")})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	entries, _ := r.Snapshot()
	if len(entries) != n {
		t.Fatalf("%d clients counted, want %d", len(entries), n)
	}
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("a known client holds %.0f bytes of heap (%d clients)", per, n)
	// The key's strings are about 110 bytes; the counter, its map slot
	// and the key's headers a few hundred more. More than a KiB is a
	// regression of what the README states.
	if per > 1024 {
		t.Errorf("a known client holds %.0f bytes, more than 1 KiB", per)
	}
	runtime.KeepAlive(r)
}

// TestForgetDoesNotLoseACountedRequest: a request is never lost to a
// Forget of the clients idle before its time, even when the client's
// older counter is dropped while the request is being counted.
func TestForgetDoesNotLoseACountedRequest(t *testing.T) {
	r := NewRecorder(0, 0)
	var clock atomic.Int64
	clock.Store(1000)
	r.now = clock.Load
	k := key("idle", "v1")
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			default:
				r.Forget(clock.Load())
			}
		}
	}()
	defer close(done)
	for i := range int64(20000) {
		now := 1000 + i
		clock.Store(now)
		r.Record(k)
		// Forget drops only what was last seen before the clock: this
		// request stays.
		entries, _ := r.Snapshot()
		if len(entries) != 1 || entries[0].Last != now || entries[0].Count < 1 {
			t.Fatalf("after the request at %d: %+v", now, entries)
		}
	}
}
