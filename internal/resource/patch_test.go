package resource

import (
	"errors"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

func TestApplyJSONPatchTestsOfTheWholeDocument(t *testing.T) {
	doc := []byte(`{"a":1}`)
	for _, c := range []struct {
		patch string
		ok    bool
	}{
		{`[{"op":"test","path":""}]`, false},
		{`[{"op":"test","path":"","value":null}]`, false},
		{`[{"op":"test","path":"","value":{"a":2}}]`, false},
		{`[{"op":"test","path":"","value":{"a":1}}]`, true},
		{`[{"op":"test","path":"/a"}]`, false}, // a value compared with a missing one
		{`[{"op":"test","path":"/a","value":1},{"op":"replace","path":"/a","value":3}]`, true},
	} {
		ops, err := jsonpatch.DecodePatch([]byte(c.patch))
		if err != nil {
			t.Fatal(err)
		}
		_, err = applyJSONPatchOps(ops, doc)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.patch, err)
		}
		if err != nil && !errors.Is(err, jsonpatch.ErrTestFailed) {
			t.Errorf("%s: %v is not a failed test", c.patch, err)
		}
	}
}
