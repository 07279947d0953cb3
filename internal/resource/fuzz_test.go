package resource

import (
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/storage"
)

// FuzzDecodeContinue: any continue token either decodes to a key under the
// resource's prefix, without climbing out of it, or is refused.
func FuzzDecodeContinue(f *testing.F) {
	const prefix = "/registry/example.com/things/"
	seed, err := storage.EncodeContinue(prefix+"ns/name", prefix, 42)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiIuLi8uLi9zZWNyZXRzIn0")
	f.Add("not base64!")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		key, rev, err := decodeContinue(token, prefix)
		if err != nil {
			return
		}
		if !strings.HasPrefix(key, prefix) || strings.Contains(key, "/../") || rev <= 0 {
			t.Fatalf("token %q decoded to key %q rev %d", token, key, rev)
		}
		if key == prefix {
			// A start of "/" is the beginning of the range, as
			// kube-apiserver reads it too; no token encodes it again.
			return
		}
		// What decodes, encodes back to the same place.
		token, err = storage.EncodeContinue(key, prefix, rev)
		if err != nil {
			t.Fatalf("encode %q: %v", key, err)
		}
		again, rev2, err := decodeContinue(token, prefix)
		if err != nil || again != key || rev2 != rev {
			t.Fatalf("round trip of %q: %q %d %v", key, again, rev2, err)
		}
	})
}
