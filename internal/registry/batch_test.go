package registry

import (
	"context"
	"testing"
	"time"

	"github.com/crdserver/crdserver/internal/store"
)

// quietWatcher is a watch with no more events.
type quietWatcher struct{ ready, done chan struct{} }

func (w quietWatcher) Next(buf []store.Event, _ int) []store.Event { return buf }
func (w quietWatcher) Ready() <-chan struct{}                      { return w.ready }
func (w quietWatcher) Done() <-chan struct{}                       { return w.done }

// A batch that waits for more CRD events ends when a request waits for
// the Index: more returns at once when hurried, though its window has
// an hour to run.
func TestMoreEndsWhenHurried(t *testing.T) {
	w := quietWatcher{ready: make(chan struct{}), done: make(chan struct{})}
	hurry := make(chan struct{}, 1)
	got := make(chan int, 1)
	go func() {
		got <- len(more(context.Background(), w, hurry, nil, 10, time.Now().Add(time.Hour)))
	}()
	select {
	case <-got:
		t.Fatal("more returned before its window ended or it was hurried")
	case <-time.After(50 * time.Millisecond):
	}
	hurry <- struct{}{}
	select {
	case n := <-got:
		if n != 0 {
			t.Fatalf("more returned %d events, want none", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("more did not return when hurried")
	}
}

// WaitApplied hurries the batch for as long as the Index is behind, and
// returns once it reflects the revision.
func TestWaitAppliedHurries(t *testing.T) {
	r := &Registry{hurry: make(chan struct{}, 1)}
	ch := make(chan struct{})
	r.appliedCh.Store(&ch)
	r.markApplied(5)
	if err := r.WaitApplied(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.hurry:
		t.Fatal("hurried for a revision the Index reflects")
	default:
	}

	done := make(chan error, 1)
	go func() { done <- r.WaitApplied(context.Background(), 7) }()
	for _, applied := range []int64{6, 7} {
		select {
		case <-r.hurry:
		case <-time.After(10 * time.Second):
			t.Fatalf("WaitApplied(7) did not hurry the batch with the Index at %d", r.applied.Load())
		}
		r.markApplied(applied)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
