package store

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// reversing stores values reversed behind a marker, and refuses to read
// what it did not write: a stand-in for encryption.
type reversing struct{}

var marker = []byte("rev:")

func reverse(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[len(b)-1-i] = c
	}
	return out
}

func (reversing) ToStorage(_ context.Context, key string, v []byte) ([]byte, error) {
	return append(append(append([]byte{}, marker...), key...), reverse(v)...), nil
}

func (reversing) FromStorage(_ context.Context, key string, v []byte) ([]byte, error) {
	head := append(append([]byte{}, marker...), key...)
	if !bytes.HasPrefix(v, head) {
		return nil, errors.New("not written by this transformer for this key")
	}
	return reverse(v[len(head):]), nil
}

// Every way of reading gives back what was written; etcd holds the
// transformed value.
func TestTransformer(t *testing.T) {
	s := startStore(t)
	s.tf = reversing{}
	ctx := context.Background()
	c := readyCache(t, s, "/t/", CacheOptions{})
	plain := obj("ns", "a", "red")
	rev, err := s.Create(ctx, "/t/ns/a", plain, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.cli.Get(ctx, "/t/ns/a")
	if err != nil || bytes.Contains(raw.Kvs[0].Value, []byte("red")) || !bytes.HasPrefix(raw.Kvs[0].Value, marker) {
		t.Fatalf("etcd holds %q (%v)", raw.Kvs[0].Value, err)
	}
	kv, _, err := s.Get(ctx, "/t/ns/a", 0)
	if err != nil || !bytes.Equal(kv.Value, plain) {
		t.Fatalf("get: %q %v", kv.Value, err)
	}
	l, err := s.List(ctx, "/t/", PrefixEnd("/t/"), 0, 0)
	if err != nil || len(l.KVs) != 1 || !bytes.Equal(l.KVs[0].Value, plain) {
		t.Fatalf("list: %+v %v", l, err)
	}
	// A conflict returns the current value, readable.
	if _, cur, err := s.Update(ctx, "/t/ns/a", obj("ns", "a", "blue"), rev-1, WriteOptions{}); !errors.Is(err, ErrConflict) || !bytes.Equal(cur.Value, plain) {
		t.Fatalf("conflict: %v %+v", err, cur)
	}
	if _, _, err := s.Update(ctx, "/t/ns/a", obj("ns", "a", "blue"), rev, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, _ := s.CurrentRevision(ctx)
	if err := c.WaitFresh(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if it, _ := c.Get("/t/ns/a"); it == nil || it.Labels["color"] != "blue" {
		t.Fatalf("cache: %+v", it)
	}
	// A value the transformer cannot read fails the read, never passes
	// as plaintext.
	if _, err := s.cli.Put(ctx, "/t/ns/b", string(obj("ns", "b", "green"))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "/t/ns/b", 0); err == nil {
		t.Fatal("an untransformed value was read")
	}
}

// A key written with a TTL goes by itself, and the cache sees it go.
func TestTTL(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	c := readyCache(t, s, "/e/", CacheOptions{})
	w := watchState(t, c)
	if _, err := s.Create(ctx, "/e/ns/short", obj("ns", "short", "x"), WriteOptions{TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/e/ns/kept", obj("ns", "kept", "x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/e/ns/short2", obj("ns", "short2", "x"), WriteOptions{TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	// Writes of one TTL share a lease (granted for the TTL and 5% more),
	// while it has at least the TTL to run.
	if _, err := s.Create(ctx, "/e/ns/long", obj("ns", "long", "x"), WriteOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	kv, _, _ := s.Get(ctx, "/e/ns/long", 0)
	if _, _, err := s.Update(ctx, "/e/ns/long", obj("ns", "long", "y"), kv.ModRevision, WriteOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/e/ns/long2", obj("ns", "long2", "x"), WriteOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	a, _ := s.cli.Get(ctx, "/e/ns/long")
	b, _ := s.cli.Get(ctx, "/e/ns/long2")
	if a.Kvs[0].Lease == 0 || a.Kvs[0].Lease != b.Kvs[0].Lease {
		t.Fatalf("leases %d and %d", a.Kvs[0].Lease, b.Kvs[0].Lease)
	}
	ttl, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(a.Kvs[0].Lease))
	if err != nil || ttl.GrantedTTL != 3600+60 {
		t.Fatalf("lease granted for %d s (%v)", ttl.GrantedTTL, err)
	}
	deleted := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for len(deleted) < 2 {
		select {
		case <-w.Ready():
			for _, ev := range w.Next(nil, 0) {
				if ev.Type == Deleted {
					deleted[ev.Item.Name] = true
				}
			}
		case <-deadline:
			t.Fatalf("deleted by TTL after 30 s: %v", deleted)
		}
	}
	if !deleted["short"] || !deleted["short2"] {
		t.Fatalf("deleted: %v", deleted)
	}
	if _, _, err := s.Get(ctx, "/e/ns/kept", 0); err != nil {
		t.Fatalf("the key without TTL: %v", err)
	}
}
