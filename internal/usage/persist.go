package usage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crdserver/crdserver/internal/store"
)

// Prefix is where replicas keep their records in the store, one key each
// (crdserver's bookkeeping: no resource is stored there, and no group
// without a dot is a CRD's).
const Prefix = "/registry/crdserver-versionusage/"

// record is what one replica wrote: every client it counted within the
// window, and the requests of clients beyond the bound.
type record struct {
	Replica  string           `json:"replica"`
	Written  int64            `json:"written"`
	Entries  []Entry          `json:"entries"`
	Overflow map[string]int64 `json:"overflow,omitempty"`
}

// Persister keeps a replica's counts in the store and reads every
// replica's.
type Persister struct {
	Store    store.Interface
	Recorder *Recorder
	// Replica names this replica's record; the same across its restarts
	// (ReplicaID).
	Replica string
	// Window is how long a client is remembered after its last request.
	Window time.Duration
	// Interval is how often the counts are written, when they changed.
	Interval time.Duration
	Log      *slog.Logger

	written digest // of the counts last written
	rev     int64  // the record's revision, 0 before it exists
}

func (p *Persister) key() string { return Prefix + p.Replica }

func (p *Persister) now() int64 { return p.Recorder.now() }

// Load adds what this replica's record holds (written before a restart)
// to the recorder.
func (p *Persister) Load(ctx context.Context) error {
	kv, _, err := p.Store.Get(ctx, p.key(), 0)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var rec record
	if err := json.Unmarshal(kv.Value, &rec); err != nil {
		return fmt.Errorf("version usage record %s: %w", p.key(), err)
	}
	p.rev = kv.ModRevision
	since := p.now() - int64(p.Window/time.Second)
	var keep []Entry
	for _, e := range rec.Entries {
		if e.Last >= since {
			keep = append(keep, e)
		}
	}
	p.Recorder.Seed(keep)
	p.Recorder.mu.Lock()
	for gv, n := range rec.Overflow {
		o := p.Recorder.overflow[gv]
		if o == nil {
			o = &atomic.Int64{}
			p.Recorder.overflow[gv] = o
		}
		o.Add(n)
	}
	p.Recorder.mu.Unlock()
	entries, _ := p.Recorder.Snapshot()
	p.written = digestOf(entries)
	return nil
}

// Run writes the counts every Interval while they change, until ctx ends
// (the server flushes once more when it has stopped serving).
func (p *Persister) Run(ctx context.Context) {
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := p.Flush(ctx); err != nil && ctx.Err() == nil && p.Log != nil {
				p.Log.Warn("version usage: writing this replica's record failed", "err", err)
			}
		}
	}
}

// Flush forgets the clients last seen before the window and writes the
// counts, if they changed since they were last written.
func (p *Persister) Flush(ctx context.Context) error {
	p.Recorder.Forget(p.now() - int64(p.Window/time.Second))
	entries, over := p.Recorder.Snapshot()
	sum := digestOf(entries)
	if sum == p.written && p.rev != 0 {
		return nil
	}
	b, err := json.Marshal(record{Replica: p.Replica, Written: p.now(), Entries: entries, Overflow: over})
	if err != nil {
		return err
	}
	for range 3 {
		var rev int64
		if p.rev == 0 {
			rev, err = p.Store.Create(ctx, p.key(), b, store.WriteOptions{})
		} else {
			rev, _, err = p.Store.Update(ctx, p.key(), b, p.rev, store.WriteOptions{})
		}
		switch {
		case err == nil:
			p.rev, p.written = rev, sum
			return nil
		case errors.Is(err, store.ErrExists), errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
			// Written meanwhile by an earlier life of this replica, or
			// gone: read where it is and write over it.
			kv, _, gerr := p.Store.Get(ctx, p.key(), 0)
			switch {
			case errors.Is(gerr, store.ErrNotFound):
				p.rev = 0
			case gerr != nil:
				return gerr
			default:
				p.rev = kv.ModRevision
			}
		default:
			return err
		}
	}
	return err
}

// Clients returns every replica's clients within the window, summed, this
// replica's as counted now, and the overflow by group/version.
func (p *Persister) Clients(ctx context.Context) ([]Entry, map[string]int64, error) {
	res, err := p.Store.List(ctx, Prefix, store.PrefixEnd(Prefix), 0, 0)
	if err != nil {
		return nil, nil, err
	}
	mine, over := p.Recorder.Snapshot()
	lists := [][]Entry{mine}
	for _, kv := range res.KVs {
		if kv.Key == p.key() {
			continue
		}
		var rec record
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			continue // a record that does not decode is left out
		}
		lists = append(lists, rec.Entries)
		for gv, n := range rec.Overflow {
			over[gv] += n
		}
	}
	since := p.now() - int64(p.Window/time.Second)
	var out []Entry
	for _, e := range Merge(lists...) {
		if e.Last >= since {
			out = append(out, e)
		}
	}
	return out, over, nil
}

// digest tells whether the counts changed: their sum alone would miss
// clients forgotten while as many requests came, and a last time written
// before its request's count.
type digest struct{ entries, count, last int64 }

func digestOf(es []Entry) digest {
	d := digest{entries: int64(len(es))}
	for _, e := range es {
		d.count += e.Count
		d.last += e.Last
	}
	return d
}

// ReplicaID returns the name of the replica whose data folder is dir: made
// once, and kept in dir/replica-id.
func ReplicaID(dir string) (string, error) {
	path := filepath.Join(dir, "replica-id")
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	}
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	host, _ := os.Hostname()
	id := strings.ToLower(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, host)) + "-" + hex.EncodeToString(raw[:])
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", err
	}
	return id, nil
}
