package robustness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The binaries under test, built once by TestMain: crdserver from this
// repository, and etcd at the version crdserver's module pins.
var (
	crdserverBin string
	etcdBin      string
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	binDir, err := os.MkdirTemp("", "crdserver-robustness-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "robustness:", err)
		return 1
	}
	defer os.RemoveAll(binDir)
	crdserverBin = filepath.Join(binDir, "crdserver")
	etcdBin = filepath.Join(binDir, "etcd")
	var wg sync.WaitGroup
	var errs [2]error
	// ROBUSTNESS_RACE=1: crdserver under the race detector (a run fails
	// on a race it reports).
	var flags []string
	if os.Getenv("ROBUSTNESS_RACE") == "1" {
		flags = append(flags, "-race")
	}
	wg.Go(func() { errs[0] = goBuild("../..", crdserverBin, "./cmd/crdserver", flags...) })
	wg.Go(func() { errs[1] = goBuild("../..", etcdBin, "go.etcd.io/etcd/server/v3") })
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		fmt.Fprintln(os.Stderr, "robustness:", err)
		return 1
	}
	out, err := exec.Command("go", "list", "-C", "../..", "-e", "-f", "{{.Dir}}", "./...").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "robustness: go list:", err)
		return 1
	}
	sourceDirs = strings.Fields(string(out))
	return m.Run()
}

// sourceDirs are crdserver's package folders. go test caches a result by
// the files a test reads once it runs: the binaries are built outside it,
// so each test reads these folders (readSources).
var sourceDirs []string

func readSources() {
	for _, dir := range sourceDirs {
		_, _ = os.ReadDir(dir)
	}
	_, _ = os.Stat("../../go.mod")
	_, _ = os.Stat("../../go.sum")
}

func goBuild(dir, out, pkg string, flags ...string) error {
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, pkg)...)
	cmd.Dir = dir
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, output)
	}
	return nil
}
