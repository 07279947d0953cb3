package e2e

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
)

// TestProfiling: kubectl gets Go's profiles from /debug/pprof/ as from
// kube-apiserver with --profiling: cluster-admin may, another user only
// once RBAC allows the non-resource URLs, and --profiling=false serves
// none.
func TestProfiling(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	k := newKubectl(t, srv)

	if out := k.run(t, "get", "--raw", "/debug/pprof/heap?debug=1"); !strings.HasPrefix(out, "heap profile:") {
		t.Errorf("heap profile (debug=1) starts %q", firstLine(out))
	}
	if out := k.run(t, "get", "--raw", "/debug/pprof/goroutine?debug=1"); !strings.HasPrefix(out, "goroutine profile:") {
		t.Errorf("goroutine profile (debug=1) starts %q", firstLine(out))
	}
	if out := k.run(t, "get", "--raw", "/debug/pprof/"); !strings.Contains(out, "/debug/pprof/") || !strings.Contains(out, "heap") {
		t.Errorf("the index names no profiles:\n%s", out)
	}
	// Other paths under /debug/ are the server's 404 Status.
	if stderr := k.fail(t, "get", "--raw", "/debug/flags/v"); !strings.Contains(stderr, "NotFound") {
		t.Errorf("/debug/flags/v: %s", stderr)
	}
	// A CPU profile is a gzipped protobuf whose string table names the
	// sample types.
	raw := k.run(t, "get", "--raw", "/debug/pprof/profile?seconds=1")
	zr, err := gzip.NewReader(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("CPU profile is not gzip (%d bytes): %v", len(raw), err)
	}
	pb, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("CPU profile: %v", err)
	}
	if !bytes.Contains(pb, []byte("cpu")) || !bytes.Contains(pb, []byte("nanoseconds")) {
		t.Errorf("CPU profile (%d bytes unzipped) names no cpu/nanoseconds samples", len(pb))
	}

	// Another user is refused until RBAC allows the paths.
	stderr := k.fail(t, "get", "--raw", "/debug/pprof/heap?debug=1", "--as=alice")
	if !strings.Contains(stderr, `User "alice" cannot get path "/debug/pprof/heap"`) {
		t.Errorf("alice's GET: %s", stderr)
	}
	k.run(t, "create", "clusterrole", "profiles", "--verb=get", "--non-resource-url=/debug/pprof/*")
	k.run(t, "create", "clusterrolebinding", "alice-profiles", "--clusterrole=profiles", "--user=alice")
	if out := k.run(t, "get", "--raw", "/debug/pprof/heap?debug=1", "--as=alice"); !strings.HasPrefix(out, "heap profile:") {
		t.Errorf("alice's heap profile starts %q", firstLine(out))
	}

	off := startServer(t, "--profiling=false")
	stderr = newKubectl(t, off).fail(t, "get", "--raw", "/debug/pprof/heap?debug=1")
	if !strings.Contains(stderr, "NotFound") && !strings.Contains(stderr, "could not find the requested resource") {
		t.Errorf("--profiling=false: %s", stderr)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
