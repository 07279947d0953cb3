package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/crdserver/crdserver/internal/apis/versionreport"
)

func TestVersionsCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, _ := thingsStoredIn(ctx, t, "v.example.com", "v1beta1", true)
	kc := srv.KubeconfigPath()
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := runVersions(append(args, "--kubeconfig", kc), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	// The table of every CRD's versions.
	code, out, errOut := run()
	if code != 0 || !strings.Contains(out, "CRD") || !strings.Contains(out, "things.v.example.com   v1beta1   true     false     true         1         1") {
		t.Fatalf("table (%d):\n%s%s", code, out, errOut)
	}
	// What keeps v1beta1: exit 1, each blocker with its fix.
	code, out, _ = run("things.v.example.com", "--check-remove", "v1beta1")
	if code != 1 || !strings.Contains(out, "v1beta1 of things.v.example.com cannot be removed yet:") ||
		!strings.Contains(out, "- Clients: 1 clients called v1beta1") || !strings.Contains(out, "- StoredObjects: 1 objects are stored in v1beta1: one") ||
		!strings.Contains(out, "- StoredVersions:") || !strings.Contains(out, "  fix: migrate them to v1") {
		t.Fatalf("check-remove v1beta1 (%d):\n%s", code, out)
	}
	// As JSON, the report itself.
	code, out, _ = run("things.v.example.com", "--check-remove", "v1", "-o", "json")
	var list versionreport.VersionReportList
	if code != 1 || json.Unmarshal([]byte(out), &list) != nil || len(list.Items) != 1 || list.Items[0].Status.Blockers[0].Reason != versionreport.ReasonStorageVersion {
		t.Fatalf("check-remove v1 -o json (%d):\n%s", code, out)
	}
	// Usage errors: 2.
	for _, args := range [][]string{{"--check-remove", "v1"}, {"nodot"}, {"-o", "wide"},
		{"--retire", "v1beta1"}, {"things.v.example.com", "--dry-run"}, {"things.v.example.com", "--remove"},
		{"things.v.example.com", "--retire", "v1beta1", "--check-remove", "v1beta1"}} {
		if code, _, _ := run(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	// The storage version is not retired; nothing changes.
	if code, out, _ := run("things.v.example.com", "--retire", "v1"); code != 1 || !strings.Contains(out, "storage version: STOPPED: v1 is the storage version of things.v.example.com") {
		t.Errorf("retire v1 (%d):\n%s", code, out)
	}
	if code, _, errOut := run("things.v.example.com", "--retire", "v2"); code != 1 || !strings.Contains(errOut, "has no version v2") {
		t.Errorf("retire v2 (%d): %s", code, errOut)
	}
	if code, _, errOut := run("absent.v.example.com"); code != 1 || !strings.Contains(errOut, "no CRD absent.v.example.com") {
		t.Errorf("an absent CRD: %d %s", code, errOut)
	}
}
