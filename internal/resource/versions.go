package resource

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/crdserver/crdserver/internal/store"
)

// Versions is what a stored object says of the API versions it was
// written at: the apiVersion it is stored in, and each manager of its
// managedFields with the apiVersion of its entry. DecodeItem keeps it with
// the cache item, so that what is stored in (or managed at) each version
// is counted without reading the objects again. Objects alike share one:
// at most maxVersions are kept shared, past that each object has its own.
type Versions struct {
	APIVersion string
	Managed    []ManagedAt // sorted, each once
}

// ManagedAt is one managedFields entry's manager and apiVersion.
type ManagedAt struct{ Manager, APIVersion string }

// maxVersions bounds the shared Versions (managers are clients' names).
const maxVersions = 4096

var versions = struct {
	sync.RWMutex
	m map[string]*Versions
}{m: map[string]*Versions{}}

// versionsOf returns the shared Versions of an apiVersion and managed
// entries (which it sorts).
func versionsOf(apiVersion string, managed []ManagedAt) *Versions {
	slices.SortFunc(managed, func(a, b ManagedAt) int {
		if c := strings.Compare(a.Manager, b.Manager); c != 0 {
			return c
		}
		return strings.Compare(a.APIVersion, b.APIVersion)
	})
	managed = slices.Compact(managed)
	var b strings.Builder
	b.WriteString(apiVersion)
	for _, m := range managed {
		b.WriteByte(0)
		b.WriteString(m.Manager)
		b.WriteByte(0)
		b.WriteString(m.APIVersion)
	}
	key := b.String()
	versions.RLock()
	v := versions.m[key]
	versions.RUnlock()
	if v != nil {
		return v
	}
	v = &Versions{APIVersion: apiVersion, Managed: slices.Clip(managed)}
	versions.Lock()
	defer versions.Unlock()
	if old := versions.m[key]; old != nil {
		return old
	}
	if len(versions.m) < maxVersions {
		versions.m[key] = v
	}
	return v
}

// VersionsOf returns an item's Versions: what DecodeItem kept, or, for an
// item it did not make, read from the item's JSON.
func VersionsOf(it *store.Item) *Versions {
	if v := keptVersions(it); v != nil {
		return v
	}
	var m itemMeta
	_ = json.Unmarshal(it.Bytes(), &m) // metadata that does not decode: stored in no known version
	return m.versions()
}

// keptVersions is the Versions DecodeItem kept with the item, or nil.
func keptVersions(it *store.Item) *Versions {
	switch m := it.Meta.(type) {
	case *Versions:
		return m
	case *Lifecycle:
		return m.Versions
	}
	return nil
}

// versions is the shared Versions of what an object's metadata says.
func (m *itemMeta) versions() *Versions {
	var managed []ManagedAt
	for _, e := range m.Metadata.ManagedFields {
		managed = append(managed, ManagedAt{Manager: e.Manager, APIVersion: e.APIVersion})
	}
	return versionsOf(m.APIVersion, managed)
}
