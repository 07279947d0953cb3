package authinfo

import (
	"bytes"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/crdserver/crdserver/internal/pki"
)

func caPEM(t *testing.T) []byte {
	t.Helper()
	b, err := pki.EnsureScratch(t.TempDir(), []string{"127.0.0.1"}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return b.CACert
}

// Combine keeps what is there, in its order, and adds the certificates it
// lacks once.
func TestCombine(t *testing.T) {
	a, b := caPEM(t), caPEM(t)
	for _, c := range []struct {
		name      string
		have, add []byte
		want      [][]byte
	}{
		{"empty", nil, a, [][]byte{a}},
		{"already there", a, a, [][]byte{a}},
		{"kept first", b, a, [][]byte{b, a}},
		{"both there", append(append([]byte{}, a...), b...), b, [][]byte{a, b}},
		{"blank kept out", []byte("\n \n"), a, [][]byte{a}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Combine(c.have, c.add)
			if err != nil {
				t.Fatal(err)
			}
			if want := bytes.Join(c.want, nil); !bytes.Equal(got, want) {
				t.Fatalf("got\n%s\nwant\n%s", got, want)
			}
			if _, err := certutil.ParseCertsPEM(got); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := Combine([]byte("not PEM"), a); err == nil {
		t.Fatal("a bundle that is not PEM combined")
	}
}
