package main

import (
	"fmt"
	"strings"
)

// table is a Markdown table: a header, each column's alignment, and rows.
// Every table of the report is written with it.
type table struct {
	head  []string
	align []string // per column: "---" (the default), ":--", "--:" or ":-:"
	rows  [][]string
}

func newTable(head ...string) *table {
	t := &table{head: head, align: make([]string, len(head))}
	for i := range t.align {
		t.align[i] = "---"
	}
	return t
}

// noCell is a cell left out, written "| |"; an empty string is written
// "|  |".
const noCell = "\x00"

// row adds a row; each cell is written with fmt.Sprint (a val as its
// String), nil as noCell.
func (t *table) row(cells ...any) {
	r := make([]string, len(cells))
	for i, c := range cells {
		r[i] = noCell
		if c != nil {
			r[i] = fmt.Sprint(c)
		}
	}
	t.rows = append(t.rows, r)
}

// cmp adds a row of a metric, two figures and the ratio of the first to
// the second (by ratio, or by r when given).
func (t *table) cmp(metric string, a, b val, r ...func(a, b val) string) {
	f := ratio
	if len(r) > 0 {
		f = r[0]
	}
	t.row(metric, a, b, f(a, b))
}

// line writes one row: "| a | b |".
func line(cells []string) string {
	var b strings.Builder
	b.WriteString("|")
	for _, c := range cells {
		if c != noCell {
			b.WriteString(" " + c)
		}
		b.WriteString(" |")
	}
	return b.String() + "\n"
}

func (t *table) String() string {
	var b strings.Builder
	b.WriteString(line(t.head))
	b.WriteString("|" + strings.Join(t.align, "|") + "|\n")
	for _, r := range t.rows {
		b.WriteString(line(r))
	}
	return b.String()
}

// fig is a row of a table of two servers: its metric, its cell for one
// server's results S, and the ratio of the two cells (nil: "–").
type fig[S any] struct {
	metric string
	cell   func(S) val
	ratio  func(a, b val) string
}

// figs adds a row to t for each fig, lead being the cells before the
// metric.
func figs[S any](t *table, fs []fig[S], c, r S, lead ...any) {
	for _, f := range fs {
		cv, rv := f.cell(c), f.cell(r)
		rt := "–"
		if f.ratio != nil {
			rt = f.ratio(cv, rv)
		}
		t.row(append(lead, f.metric, cv, rv, rt)...)
	}
}
