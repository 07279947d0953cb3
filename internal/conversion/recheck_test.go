package conversion

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/store"
)

// fakeWebhook converts as a webhook whose answers are checked again after
// interval: it rewrites apiVersion and sets the field "answer" to what it
// is told to answer, or fails.
type fakeWebhook struct {
	interval time.Duration

	mu      sync.Mutex
	answer  string
	fail    error
	calls   int
	objects int
	// gate, when set, holds the next call until it is closed; entered
	// says that call arrived.
	gate    chan struct{}
	entered chan struct{}
}

func (f *fakeWebhook) recheckInterval() time.Duration { return f.interval }

func (f *fakeWebhook) set(answer string, fail error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer, f.fail = answer, fail
}

func (f *fakeWebhook) counts() (calls, objects int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.objects
}

func (f *fakeWebhook) Convert(ctx context.Context, objs [][]byte, to string) (Result, error) {
	f.mu.Lock()
	f.calls++
	f.objects += len(objs)
	answer, fail, gate := f.answer, f.fail, f.gate
	f.gate = nil
	f.mu.Unlock()
	if gate != nil {
		f.entered <- struct{}{}
		<-gate
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if fail != nil {
		return Result{}, fail
	}
	res, err := None{}.Convert(ctx, objs, to)
	if err != nil {
		return Result{}, err
	}
	for i := range res.Objects {
		if res.changedAt(i) {
			if res.Objects[i], err = jsonraw.SetString(res.Objects[i], "answer", answer); err != nil {
				return Result{}, err
			}
		}
	}
	return res, nil
}

// fakeClock makes clock a counter the test moves, for the test's duration.
func fakeClock(t *testing.T) *atomic.Int64 {
	var now atomic.Int64
	now.Store(1)
	saved := clock
	clock = now.Load
	t.Cleanup(func() { clock = saved })
	return &now
}

// answers reads the field "answer" of each object.
func answers(t *testing.T, objs [][]byte) []string {
	t.Helper()
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i], _, _ = jsonraw.String(o, "answer")
	}
	return out
}

// readAll converts items to g/v2 and checks every object carries want.
func readAll(t *testing.T, conv Converter, items []*store.Item, want string) {
	t.Helper()
	out, err := Items(context.Background(), conv, items, "g/v2")
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	for i, a := range answers(t, out) {
		if a != want {
			t.Fatalf("object %d answered %q, want %q", i, a, want)
		}
	}
}

func expectCounts(t *testing.T, f *fakeWebhook, calls, objects int) {
	t.Helper()
	if c, o := f.counts(); c != calls || o != objects {
		t.Fatalf("webhook got %d calls with %d objects, want %d with %d", c, o, calls, objects)
	}
}

// TestWebhookAnswersCheckedAgain: a kept answer is served until the
// interval passes, then asked again once, for all the objects read in
// one call; a new answer replaces it, a failure is the read's error and
// leaves nothing kept, and reads of the stored version never ask.
func TestWebhookAnswersCheckedAgain(t *testing.T) {
	now := fakeClock(t)
	const interval = 10 * time.Second
	hook := &fakeWebhook{interval: interval, answer: "old"}
	conv := &WithSchemas{Inner: hook}
	items := cachedItems(t, 3)

	readAll(t, conv, items, "old")
	expectCounts(t, hook, 1, 3)
	hook.set("fixed", nil)
	now.Add(int64(interval) - 1)
	readAll(t, conv, items, "old")
	readAll(t, conv, items[:1], "old")
	expectCounts(t, hook, 1, 3)

	// Due: one call for the three objects, and the new answer is kept.
	now.Add(1)
	readAll(t, conv, items, "fixed")
	expectCounts(t, hook, 2, 6)
	readAll(t, conv, items, "fixed")
	expectCounts(t, hook, 2, 6)
	for i, it := range items {
		r, ok := lookup(it, conv, "g/v2")
		if !ok || r.answer == nil || r.answer.at != now.Load() {
			t.Fatalf("object %d: the new answer is not remembered as asked now: %+v %v", i, r, ok)
		}
	}

	// An object read alone is asked again alone.
	now.Add(int64(interval))
	readAll(t, conv, items[1:2], "fixed")
	expectCounts(t, hook, 3, 7)
	readAll(t, conv, items, "fixed")
	expectCounts(t, hook, 4, 9)

	// The webhook fails: the read that asks again fails with its error,
	// and so does every read after it, as a first conversion does.
	broken := errors.New("conversion webhook for g/v1, Kind=K failed: broken")
	hook.set("", broken)
	now.Add(int64(interval))
	for round := 0; round < 2; round++ {
		if _, err := Items(context.Background(), conv, items, "g/v2"); !errors.Is(err, broken) {
			t.Fatalf("round %d: read through a failing webhook: %v", round, err)
		}
	}
	expectCounts(t, hook, 6, 15)
	for i, it := range items {
		if r, ok := lookup(it, conv, "g/v2"); ok {
			t.Fatalf("object %d: the failed answer is still remembered: %+v", i, r)
		}
		if r, ok := lookupIn(it, hook, "g/v2", innerHash(it)); ok {
			t.Fatalf("object %d: the webhook's failed answer is still remembered: %+v", i, r)
		}
	}
	// The stored version needs no webhook.
	out, err := Items(context.Background(), conv, items, "g/v1")
	if err != nil || answers(t, out)[0] != "" {
		t.Fatalf("read in the stored version: %v %s", err, out)
	}
	expectCounts(t, hook, 6, 15)

	// It works again: answered and kept.
	hook.set("again", nil)
	readAll(t, conv, items, "again")
	readAll(t, conv, items, "again")
	expectCounts(t, hook, 7, 18)
}

// innerHash is the hash of what the webhook was sent for an item, read
// from its memo (zero: none remembered).
func innerHash(it *store.Item) (h [32]byte) {
	r, _ := it.Memo().Load().(*remembered)
	for ; r != nil; r = r.next {
		if r.in != h {
			return r.in
		}
	}
	return h
}

// TestWebhookAnswerAskedOnce: of readers that find an answer due at the
// same time, one asks the webhook; the others are served the kept answer
// without waiting for it.
func TestWebhookAnswerAskedOnce(t *testing.T) {
	now := fakeClock(t)
	const interval = time.Second
	hook := &fakeWebhook{interval: interval, answer: "old"}
	conv := &WithSchemas{Inner: hook}
	items := cachedItems(t, 4)
	readAll(t, conv, items, "old")

	hook.mu.Lock()
	hook.answer = "new"
	hook.gate, hook.entered = make(chan struct{}), make(chan struct{}, 1)
	gate, entered := hook.gate, hook.entered
	hook.mu.Unlock()
	now.Add(int64(interval))
	done := make(chan error, 1)
	go func() {
		out, err := Items(context.Background(), conv, items, "g/v2")
		if err == nil && answers(t, out)[3] != "new" {
			err = fmt.Errorf("the reader that asked got %s", out[3])
		}
		done <- err
	}()
	<-entered
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			out, err := Items(context.Background(), conv, items, "g/v2")
			if err != nil {
				t.Errorf("reader: %v", err)
				return
			}
			for i, a := range answers(t, out) {
				if a != "old" {
					t.Errorf("a reader that did not ask got %q for object %d", a, i)
				}
			}
		})
	}
	wg.Wait()
	expectCounts(t, hook, 2, 8)
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	readAll(t, conv, items, "new")
	expectCounts(t, hook, 2, 8)
}

// TestWebhookAnswersCheckedUnderLoad: readers racing through several
// intervals ask the webhook once per object and interval.
func TestWebhookAnswersCheckedUnderLoad(t *testing.T) {
	now := fakeClock(t)
	const interval = time.Second
	hook := &fakeWebhook{interval: interval, answer: "first"}
	conv := &WithSchemas{Inner: hook}
	items := cachedItems(t, 16)
	readAll(t, conv, items, "first")
	for round := range 5 {
		now.Add(int64(interval))
		hook.set(fmt.Sprint("answer", round), nil)
		_, before := hook.counts()
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Go(func() {
				for k := range 20 {
					lo := (g + k) % len(items)
					if _, err := Items(context.Background(), conv, items[lo:], "g/v2"); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		readAll(t, conv, items, fmt.Sprint("answer", round))
		if _, objects := hook.counts(); objects-before != len(items) {
			t.Fatalf("round %d: the webhook was sent %d objects for %d due, want one each", round, objects-before, len(items))
		}
	}
}

// TestWebhookAnswerDueAfterCRDEdit: a CRD converter made after an edit
// takes the webhook's kept answers while they are not due, and asks again
// those that are.
func TestWebhookAnswerDueAfterCRDEdit(t *testing.T) {
	now := fakeClock(t)
	const interval = time.Second
	hook := &fakeWebhook{interval: interval, answer: "old"}
	items := cachedItems(t, 2)
	readAll(t, &WithSchemas{Inner: hook}, items, "old")
	hook.set("new", nil)
	readAll(t, &WithSchemas{Inner: hook, SchemaRev: 1}, items, "old")
	expectCounts(t, hook, 1, 2)
	now.Add(int64(interval))
	edited := &WithSchemas{Inner: hook, SchemaRev: 2}
	readAll(t, edited, items, "new")
	readAll(t, edited, items, "new")
	expectCounts(t, hook, 2, 4)
}

// TestWebhookRecheckCancelled: a reader that leaves while it asks again
// keeps the answer, and the next reader asks.
func TestWebhookRecheckCancelled(t *testing.T) {
	now := fakeClock(t)
	const interval = time.Second
	hook := &fakeWebhook{interval: interval, answer: "old"}
	conv := &WithSchemas{Inner: hook}
	items := cachedItems(t, 2)
	readAll(t, conv, items, "old")
	now.Add(int64(interval))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Items(ctx, conv, items, "g/v2"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled read: %v", err)
	}
	if _, ok := lookup(items[0], conv, "g/v2"); !ok {
		t.Fatal("a cancelled read forgot the answer")
	}
	hook.set("new", nil)
	readAll(t, conv, items, "new")
	expectCounts(t, hook, 3, 6)
}

// TestWebhookAnswersNotKept: below zero, every read asks the webhook.
func TestWebhookAnswersNotKept(t *testing.T) {
	hook := &fakeWebhook{interval: -1, answer: "a"}
	conv := &WithSchemas{Inner: hook}
	items := cachedItems(t, 2)
	readAll(t, conv, items, "a")
	readAll(t, conv, items, "a")
	expectCounts(t, hook, 2, 4)
	if r, ok := items[0].Memo().Load().(*remembered); ok && r != nil {
		t.Fatalf("an answer not to be kept was remembered: %+v", r)
	}
	// What needs no webhook is still remembered.
	if _, err := Items(context.Background(), conv, items, "g/v1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := lookup(items[0], conv, "g/v1"); !ok {
		t.Fatal("the stored version's reading is not remembered")
	}
}

// TestRememberKeepsNewerAnswer: an older answer never replaces a newer
// one.
func TestRememberKeepsNewerAnswer(t *testing.T) {
	conv := &counting{}
	it := cachedItems(t, 1)[0]
	remember(it, conv, "v2", []byte("new"), &answer{at: 20})
	remember(it, conv, "v2", []byte("old"), &answer{at: 10})
	if r, _ := lookup(it, conv, "v2"); string(r.raw) != "new" {
		t.Fatalf("replaced by an older answer: %s", r.raw)
	}
	remember(it, conv, "v2", []byte("newer"), &answer{at: 30})
	if r, _ := lookup(it, conv, "v2"); string(r.raw) != "newer" {
		t.Fatalf("not replaced by a newer answer: %s", r.raw)
	}
}

// TestWebhookRecheckSplitAcrossCPUs: a big list asks again in parts, one
// call per part, every object once.
func TestWebhookRecheckSplitAcrossCPUs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	now := fakeClock(t)
	const interval = time.Second
	hook := &fakeWebhook{interval: interval, answer: "old"}
	conv := &WithSchemas{Inner: hook}
	items := cachedItems(t, 3*splitMin)
	readAll(t, conv, items, "old")
	calls, objects := hook.counts()
	if calls < 2 || objects != len(items) {
		t.Fatalf("first list: %d calls, %d objects", calls, objects)
	}
	hook.set("new", nil)
	now.Add(int64(interval))
	readAll(t, conv, items, "new")
	expectCounts(t, hook, 2*calls, 2*len(items))
}
