package main

import (
	"os"
	"testing"
)

// TestReadMem reads this process's memory: VmRSS is its own memory and
// the pages of files it maps (this test binary's), and the two parts are
// read as well.
func TestReadMem(t *testing.T) {
	m := readMem("self", os.Getpid())
	if m.Error != "" {
		t.Fatal(m.Error)
	}
	if m.VMRSSMiB <= 0 || m.RSSAnonMiB <= 0 || m.RSSFileMiB <= 0 || m.VMHWMMiB < m.VMRSSMiB {
		t.Fatalf("memory not read: %+v", m)
	}
	// VmRSS is RssAnon + RssFile + RssShmem (none here), each rounded to KiB.
	if d := m.VMRSSMiB - m.RSSAnonMiB - m.RSSFileMiB; d < -0.01 || d > 0.01 {
		t.Fatalf("VmRSS %.3f MiB is not anon %.3f + file %.3f", m.VMRSSMiB, m.RSSAnonMiB, m.RSSFileMiB)
	}
	if m := readMem("none", 1<<30); m.Error == "" {
		t.Fatalf("no process 1<<30, yet no error: %+v", m)
	}
}
