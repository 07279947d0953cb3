package resource

import (
	"slices"
	"sync"
	"unique"
)

// A platform's objects carry few distinct label sets (an app's, a team's):
// a map per object cost some 300 bytes of the cache's memory for each
// object, for the same few sets. The cache's items share one map per set
// (read only: nothing writes to an item's Labels), at most maxLabelSets
// of them; past that the table starts over, so what it holds stays
// bounded whatever the labels, and items keep the maps they were given.

const maxLabelSets = 4096

var labelSets = struct {
	sync.Mutex
	m map[string]map[string]string
}{m: map[string]map[string]string{}}

// sharedLabels returns the shared map equal to m. nil and empty maps are
// nil.
func sharedLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	var stack [512]byte
	key := labelsKey(stack[:0], m)
	labelSets.Lock()
	defer labelSets.Unlock()
	if s, ok := labelSets.m[string(key)]; ok {
		return s
	}
	if len(labelSets.m) >= maxLabelSets {
		labelSets.m = map[string]map[string]string{}
	}
	// The strings of a set are shared with other sets (an app's, a team's).
	s := make(map[string]string, len(m))
	for k, v := range m {
		s[unique.Make(k).Value()] = unique.Make(v).Value()
	}
	labelSets.m[string(key)] = s
	return s
}

// labelsKey appends m's pairs, sorted by key, each key and value ended by
// a zero byte (which neither holds), to b.
func labelsKey(b []byte, m map[string]string) []byte {
	var keys [16]string
	ks := keys[:0]
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for _, k := range ks {
		b = append(b, k...)
		b = append(b, 0)
		b = append(b, m[k]...)
		b = append(b, 0)
	}
	return b
}
