package main

import (
	"strings"
	"testing"
)

// TestRecheckIntervalFlag: a negative interval is refused before anything
// starts.
func TestRecheckIntervalFlag(t *testing.T) {
	err := run([]string{"--data-dir", t.TempDir(), "--conversion-webhook-recheck-interval", "-1s"})
	if err == nil || !strings.Contains(err.Error(), "--conversion-webhook-recheck-interval -1s: want a duration of 0") {
		t.Fatalf("negative interval: %v", err)
	}
}
