package check

import (
	"fmt"
	"sort"
	"strings"
)

// Version is one state of a key in etcd: what the write at Rev wrote, or
// its deletion.
type Version struct {
	Rev     int64  `json:"rev"`
	Deleted bool   `json:"deleted,omitempty"`
	WriteID string `json:"writeID,omitempty"`
	Group   string `json:"group,omitempty"`
}

// Change is one revision of one key in etcd.
type Change struct {
	Key string `json:"key"`
	Version
}

// Truth is etcd's history of the traffic's keys: the state at revision
// Start and every change after it up to End, read from etcd itself.
type Truth struct {
	Start       int64        `json:"start"`
	End         int64        `json:"end"`
	Initial     []Change     `json:"initial"` // the keys present at Start
	Changes     []Change     `json:"changes"` // after Start, in revision order
	Compactions []Compaction `json:"compactions"`
	// Foreign are keys in the traffic's resources and namespaces that
	// the server's own controllers write (a namespace's
	// kube-root-ca.crt ConfigMap): lists and watches see them and are
	// checked with them, but no request of the traffic wrote them.
	Foreign []string `json:"foreign,omitempty"`

	byKey   map[string][]Version
	byWrite map[string]Change
	// twice are the changes that wrote a write ID an earlier one did.
	twice []Change
}

// Index prepares the truth for the checks; call it once its fields are
// set. It fails if the changes are not in revision order. (One write ID
// written twice is not a failure of the truth's: Check reports it.)
func (t *Truth) Index() error {
	t.byKey = map[string][]Version{}
	t.byWrite = map[string]Change{}
	t.twice = nil
	add := func(c Change) error {
		vs := t.byKey[c.Key]
		if len(vs) > 0 && vs[len(vs)-1].Rev >= c.Rev {
			return fmt.Errorf("truth: %s changed at revision %d after %d", c.Key, c.Rev, vs[len(vs)-1].Rev)
		}
		t.byKey[c.Key] = append(vs, c.Version)
		if c.WriteID != "" && !c.Deleted {
			if _, dup := t.byWrite[c.WriteID]; dup {
				// One write applied twice: a violation, not a broken
				// truth (checkAcknowledged reports it).
				t.twice = append(t.twice, c)
			} else {
				t.byWrite[c.WriteID] = c
			}
		}
		return nil
	}
	for _, c := range t.Initial {
		if err := add(c); err != nil {
			return err
		}
	}
	last := t.Start
	for _, c := range t.Changes {
		if c.Rev < last {
			return fmt.Errorf("truth: change at revision %d after %d", c.Rev, last)
		}
		last = c.Rev
		if err := add(c); err != nil {
			return err
		}
	}
	return nil
}

// Keys returns every key the truth knows, sorted.
func (t *Truth) Keys() []string {
	out := make([]string, 0, len(t.byKey))
	for k := range t.byKey {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Versions returns the versions of key, oldest first.
func (t *Truth) Versions(key string) []Version { return t.byKey[key] }

// Written returns the change that wrote writeID, if etcd holds one.
func (t *Truth) Written(writeID string) (Change, bool) {
	c, ok := t.byWrite[writeID]
	return c, ok
}

// At returns the state of key at revision rev: false when it is absent
// then.
func (t *Truth) At(key string, rev int64) (Version, bool) {
	vs := t.byKey[key]
	i := sort.Search(len(vs), func(i int) bool { return vs[i].Rev > rev })
	if i == 0 || vs[i-1].Deleted {
		return Version{}, false
	}
	return vs[i-1], true
}

// WrittenAt returns the version of key written exactly at rev.
func (t *Truth) WrittenAt(key string, rev int64) (Version, bool) {
	vs := t.byKey[key]
	i := sort.Search(len(vs), func(i int) bool { return vs[i].Rev >= rev })
	if i < len(vs) && vs[i].Rev == rev {
		return vs[i], true
	}
	return Version{}, false
}

// After returns the first version of key after rev.
func (t *Truth) After(key string, rev int64) (Version, bool) {
	vs := t.byKey[key]
	i := sort.Search(len(vs), func(i int) bool { return vs[i].Rev > rev })
	if i < len(vs) {
		return vs[i], true
	}
	return Version{}, false
}

// State returns the objects in scope at revision rev, in key order.
func (t *Truth) State(s Scope, rev int64) []Obj {
	var out []Obj
	for _, k := range t.Keys() {
		if !s.InResource(k) {
			continue
		}
		if v, ok := t.At(k, rev); ok && s.Matches(k, v.Group) {
			out = append(out, Obj{Key: k, Rev: v.Rev, WriteID: v.WriteID, Group: v.Group})
		}
	}
	return out
}

// LastChange returns the revision of the last change in scope's resource
// (and namespace) at or before rev, or Start.
func (t *Truth) LastChange(s Scope, rev int64) int64 {
	last := t.Start
	for _, c := range t.Changes {
		if c.Rev > rev {
			break
		}
		if s.InResource(c.Key) {
			last = c.Rev
		}
	}
	return last
}

// Events returns the watch events a watch of scope must deliver for the
// changes in (from, to]: an object entering the scope is ADDED, one in it
// MODIFIED, one leaving it (deleted, or its labels no longer selected)
// DELETED with its last state in scope at the change's revision.
func (t *Truth) Events(s Scope, from, to int64) []WatchEvent {
	i := sort.Search(len(t.Changes), func(i int) bool { return t.Changes[i].Rev > from })
	var out []WatchEvent
	for ; i < len(t.Changes) && t.Changes[i].Rev <= to; i++ {
		c := t.Changes[i]
		if !s.InResource(c.Key) {
			continue
		}
		prev, had := t.At(c.Key, c.Rev-1)
		was := had && s.Matches(c.Key, prev.Group)
		is := !c.Deleted && s.Matches(c.Key, c.Group)
		switch {
		case is && !was:
			out = append(out, WatchEvent{Type: "ADDED", Obj: Obj{Key: c.Key, Rev: c.Rev, WriteID: c.WriteID, Group: c.Group}})
		case is && was:
			out = append(out, WatchEvent{Type: "MODIFIED", Obj: Obj{Key: c.Key, Rev: c.Rev, WriteID: c.WriteID, Group: c.Group}})
		case was:
			out = append(out, WatchEvent{Type: "DELETED", Obj: Obj{Key: c.Key, Rev: c.Rev, WriteID: prev.WriteID, Group: prev.Group}})
		}
	}
	return out
}

// RevisionsIn returns the revisions of the changes in scope's resource in
// (from, to].
func (t *Truth) RevisionsIn(s Scope, from, to int64) map[int64]bool {
	out := map[int64]bool{}
	for _, c := range t.Changes {
		if c.Rev > from && c.Rev <= to && s.InResource(c.Key) {
			out[c.Rev] = true
		}
	}
	return out
}

// Compacted reports whether revision rev had been compacted away by time
// at: a compaction to a later revision was asked for by then.
func (t *Truth) Compacted(rev, at int64) bool {
	for _, c := range t.Compactions {
		if c.At <= at && rev < c.Rev {
			return true
		}
	}
	return false
}

// Key returns the key of an object: resource/namespace/name.
func Key(resource, namespace, name string) string {
	return resource + "/" + namespace + "/" + name
}

// SplitKey splits a key made by Key.
func SplitKey(key string) (resource, namespace, name string) {
	resource, rest, _ := strings.Cut(key, "/")
	namespace, name, _ = strings.Cut(rest, "/")
	return resource, namespace, name
}
