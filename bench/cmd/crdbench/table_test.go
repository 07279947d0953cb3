package main

import (
	"strings"
	"testing"
)

// A table is its header, the alignment row and one line a row; an empty
// string is a cell of no text, nil a cell left out.
func TestTable(t *testing.T) {
	tb := newTable("metric", "crdserver", "reference", "ratio")
	tb.cmp("list", num(10, 1, " ms"), num(20, 1, " ms"))
	tb.row("count", 3, "", nil)
	tb.align[1] = "--:"
	want := "| metric | crdserver | reference | ratio |\n" +
		"|---|--:|---|---|\n" +
		"| list | 10.0 ms | 20.0 ms | 0.50× |\n" +
		"| count | 3 |  | |\n"
	if got := tb.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// mustContain reports each of wants that text (what is named) lacks.
func mustContain(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
}
