package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	"github.com/klauspost/compress/zstd"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The v2 document is one document of everything: with a provider's
// thousand CRDs, some eighty megabytes of JSON, a gigabyte as spec
// objects. So each CRD's v2 document is kept encoded and compressed (a
// zstd'd JSON piece, in the budget pool), and the whole document is put
// together from the pieces' encoded paths and definitions: what the
// apiextensions builder's MergeSpecs makes of the spec objects (the CRDs'
// paths and definitions added to the built-in document's, which wins),
// without decoding a schema. When a CRD's definition has the name of a
// built-in one and differs from it (MergeSpecs renames it then), or a
// piece holds more than paths and definitions, the document is merged as
// spec objects by MergeSpecs itself (TestV2AsMergeSpecs compares the two).

var (
	pieceEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true), zstd.WithWindowSize(256<<10))
	pieceDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))
)

// packPiece encodes and compresses a CRD's v2 document.
func packPiece(doc *spec.Swagger) ([]byte, error) {
	b, err := doc.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return pieceEncoder.EncodeAll(b, nil), nil
}

// unpackPiece is the JSON of a packed piece.
func unpackPiece(packed []byte) ([]byte, error) { return pieceDecoder.DecodeAll(packed, nil) }

// v2Parts are the parts of a v2 document the merge adds together.
type v2Parts struct {
	Paths       map[string]json.RawMessage `json:"paths"`
	Definitions map[string]json.RawMessage `json:"definitions"`
	Parameters  map[string]json.RawMessage `json:"parameters"`
}

// mergeV2JSON merges the encoded pieces onto the encoded built-in
// document; false when only MergeSpecs can.
func mergeV2JSON(static []byte, pieces [][]byte) ([]byte, bool, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(static, &top); err != nil {
		return nil, false, err
	}
	var base v2Parts
	if err := json.Unmarshal(static, &base); err != nil {
		return nil, false, err
	}
	paths, defs, params := map[string]json.RawMessage{}, map[string]json.RawMessage{}, map[string]json.RawMessage{}
	for _, packed := range pieces {
		raw, err := unpackPiece(packed)
		if err != nil {
			return nil, false, err
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(raw, &keys); err != nil {
			return nil, false, err
		}
		for k := range keys {
			if k != "paths" && k != "definitions" && k != "parameters" && k != "swagger" && k != "info" {
				return nil, false, nil
			}
		}
		var parts v2Parts
		if err := json.Unmarshal(raw, &parts); err != nil {
			return nil, false, err
		}
		// The CRDs' pieces are added as mergeSpec adds them: the later
		// wins (their names do not collide but for the shared meta types).
		for k, v := range parts.Paths {
			paths[k] = v
		}
		for k, v := range parts.Definitions {
			defs[k] = v
		}
		for k, v := range parts.Parameters {
			params[k] = v
		}
	}
	if base.Paths == nil {
		base.Paths = map[string]json.RawMessage{}
	}
	if base.Definitions == nil {
		base.Definitions = map[string]json.RawMessage{}
	}
	if len(paths) == 0 {
		return static, true, nil // MergeSpecs merges nothing of a CRD without paths
	}
	for k := range paths {
		if _, ok := base.Paths[k]; ok {
			return nil, false, nil // MergeSpecs drops it, and what only it uses
		}
	}
	for k, v := range defs {
		b, ok := base.Definitions[k]
		if !ok {
			base.Definitions[k] = v
			continue
		}
		merged, same, err := mergeDefinitions(b, v)
		if err != nil || !same {
			return nil, false, err // MergeSpecs renames the CRD's
		}
		base.Definitions[k] = merged
	}
	if base.Parameters == nil && len(params) > 0 {
		base.Parameters = map[string]json.RawMessage{}
	}
	for k, v := range params {
		if b, ok := base.Parameters[k]; ok {
			if !sameJSON(b, v) {
				return nil, false, nil // MergeSpecs renames the CRD's
			}
			continue
		}
		base.Parameters[k] = v
	}
	for k, v := range paths {
		base.Paths[k] = v
	}
	var err error
	if top["paths"], err = json.Marshal(base.Paths); err != nil {
		return nil, false, err
	}
	if top["definitions"], err = json.Marshal(base.Definitions); err != nil {
		return nil, false, err
	}
	if base.Parameters != nil {
		if top["parameters"], err = json.Marshal(base.Parameters); err != nil {
			return nil, false, err
		}
	}
	out, err := json.Marshal(top)
	return out, err == nil, err
}

// gvkKey is the extension that lists the kinds a definition is of.
const gvkKey = "x-kubernetes-group-version-kind"

// mergeDefinitions is what the aggregator's merge makes of a built-in
// definition and a CRD's of the same name: when they are the same but for
// the kinds they list, the built-in one with the CRD's kinds added (and
// the list sorted by group/version.kind if that added any); false when
// they differ otherwise.
func mergeDefinitions(builtin, crd json.RawMessage) (json.RawMessage, bool, error) {
	if bytes.Equal(builtin, crd) {
		return builtin, true, nil
	}
	var b, c map[string]any
	if err := json.Unmarshal(builtin, &b); err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal(crd, &c); err != nil {
		return nil, false, err
	}
	bk, bHas := b[gvkKey]
	ck, cHas := c[gvkKey]
	delete(b, gvkKey)
	delete(c, gvkKey)
	if !reflect.DeepEqual(b, c) {
		return nil, false, nil
	}
	if !cHas || (bHas && !addKinds(&bk, ck)) {
		return builtin, true, nil
	}
	if !bHas {
		bk = ck
	}
	b[gvkKey] = bk
	out, err := json.Marshal(b)
	return out, err == nil, err
}

// addKinds adds to *list the kinds of more it lacks, sorting the list by
// group/version.kind if it added any, as the aggregator merges them.
func addKinds(list *any, more any) bool {
	l, _ := (*list).([]any)
	m, _ := more.([]any)
	key := func(x any) string {
		g, _ := x.(map[string]any)
		return fmt.Sprintf("%s/%s.%s", g["group"], g["version"], g["kind"])
	}
	seen := map[string]bool{}
	for _, x := range l {
		seen[key(x)] = true
	}
	added := false
	for _, x := range m {
		if !seen[key(x)] {
			l = append(l, x)
			added = true
		}
	}
	if added {
		sort.SliceStable(l, func(i, j int) bool { return key(l[i]) < key(l[j]) })
		*list = l
	}
	return added
}

// sameJSON reports whether two encoded values are the same value.
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// mergeV2Specs merges the pieces as spec objects, with MergeSpecs.
func mergeV2Specs(static *spec.Swagger, pieces [][]byte) ([]byte, error) {
	specs := make([]*spec.Swagger, 0, len(pieces))
	for _, packed := range pieces {
		raw, err := unpackPiece(packed)
		if err != nil {
			return nil, err
		}
		doc := &spec.Swagger{}
		if err := doc.UnmarshalJSON(raw); err != nil {
			return nil, err
		}
		specs = append(specs, doc)
	}
	merged, err := builder.MergeSpecs(static, specs...)
	if err != nil {
		return nil, err
	}
	return merged.MarshalJSON()
}
