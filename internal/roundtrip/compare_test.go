package roundtrip

import (
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	meta := func(extra string) string {
		return `"apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w"` + extra + `}`
	}
	for _, tc := range []struct {
		name          string
		original      string
		after         string
		strict        bool
		want          []string // Kind path original after
		wantNoneLoose bool
	}{
		{name: "same", original: `{` + meta("") + `, "spec": {"a": 1, "b": ["x"]}}`, after: `{` + meta("") + `, "spec": {"b": ["x"], "a": 1}}`},
		{
			name:     "server metadata and apiVersion ignored",
			original: `{` + meta(`, "uid": "1", "resourceVersion": "5", "generation": 1, "creationTimestamp": "2024-01-01T00:00:00Z", "managedFields": []`) + `}`,
			after:    `{"apiVersion": "example.com/v2", "kind": "W", "metadata": {"name": "w", "uid": "2", "resourceVersion": "9", "generation": 2}}`,
		},
		{
			name:     "labels are compared",
			original: `{` + meta(`, "labels": {"a": "1"}`) + `}`,
			after:    `{` + meta(`, "labels": {"a": "2"}`) + `}`,
			want:     []string{`changed metadata.labels.a "1" "2"`},
		},
		{
			name:     "lost and changed",
			original: `{` + meta("") + `, "spec": {"note": "hi", "code": "007", "tier": "bronze", "keep": true}}`,
			after:    `{` + meta("") + `, "spec": {"code": 7, "tier": "silver", "keep": true}}`,
			want: []string{
				`changed spec.code "007" 7`,
				`lost spec.note "hi" <absent>`,
				`changed spec.tier "bronze" "silver"`,
			},
		},
		{
			name:     "values as they are",
			original: `{` + meta("") + `, "spec": {"s": "a  <b>\n&", "u": "日本"}}`,
			after:    `{` + meta("") + `, "spec": {}}`,
			want:     []string{`lost spec.s "a  <b>\n&" <absent>`, `lost spec.u "日本" <absent>`},
		},
		{
			name:     "appeared",
			original: `{` + meta("") + `, "spec": {}}`,
			after:    `{` + meta("") + `, "spec": {"new": "x"}}`,
			want:     []string{`changed spec.new <absent> "x"`},
		},
		{
			name:     "numbers by value",
			original: `{` + meta("") + `, "spec": {"a": 7, "b": 0.5, "c": 9007199254740993}}`,
			after:    `{` + meta("") + `, "spec": {"a": 7.0, "b": 0.5, "c": 9007199254740992}}`,
			want:     []string{`changed spec.c 9007199254740993 9007199254740992`},
		},
		{
			name:     "a string is not a number",
			original: `{` + meta("") + `, "spec": {"a": "7"}}`,
			after:    `{` + meta("") + `, "spec": {"a": 7}}`,
			want:     []string{`changed spec.a "7" 7`},
		},
		{
			name:     "lists item by item",
			original: `{` + meta("") + `, "spec": {"l": [1, 2, 3], "m": [{"n": "a"}]}}`,
			after:    `{` + meta("") + `, "spec": {"l": [1, 5], "m": [{"n": "a"}, {"n": "b"}]}}`,
			want: []string{
				`changed spec.l[1] 2 5`,
				`lost spec.l[2] 3 <absent>`,
				`changed spec.m[1] <absent> {"n":"b"}`,
			},
		},
		{
			name:     "keys that are not identifiers",
			original: `{` + meta("") + `, "spec": {"m": {"x.y": "1", "007": "2", "ok_key-1": "3"}}}`,
			after:    `{` + meta("") + `, "spec": {"m": {}}}`,
			want: []string{
				`lost spec.m["007"] "2" <absent>`,
				`lost spec.m.ok_key-1 "3" <absent>`,
				`lost spec.m["x.y"] "1" <absent>`,
			},
		},
		{
			name:     "empty values and absent ones are equal",
			original: `{` + meta("") + `, "spec": {"s": "", "n": 0, "b": false, "z": null, "m": {}, "l": []}}`,
			after:    `{` + meta("") + `}`,
		},
		{
			name:     "but not when strict",
			original: `{` + meta("") + `, "spec": {"s": "", "n": 0}}`,
			after:    `{` + meta("") + `, "spec": {"b": false}}`,
			strict:   true,
			want: []string{
				`changed spec.b <absent> false`,
				`lost spec.n 0 <absent>`,
				`lost spec.s "" <absent>`,
			},
		},
		{
			name:     "an empty string and a zero differ",
			original: `{` + meta("") + `, "spec": {"code": ""}}`,
			after:    `{` + meta("") + `, "spec": {"code": "0"}}`,
			want:     []string{`changed spec.code "" "0"`},
		},
		{
			name:     "null and a value differ",
			original: `{` + meta("") + `, "spec": {"a": null}}`,
			after:    `{` + meta("") + `, "spec": {"a": ""}}`,
			want:     []string{`changed spec.a null ""`},
		},
		{
			name:     "type changes",
			original: `{` + meta("") + `, "spec": {"a": {"b": 1}, "c": [1]}}`,
			after:    `{` + meta("") + `, "spec": {"a": [1], "c": "1"}}`,
			want:     []string{`changed spec.a {"b":1} [1]`, `changed spec.c [1] "1"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Compare(decode(t, tc.original), decode(t, tc.after), Options{Strict: tc.strict})
			var lines []string
			for _, l := range got {
				lines = append(lines, strings.Join([]string{string(l.Kind), l.Path, show(l.Original), show(l.After)}, " "))
			}
			if strings.Join(lines, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestLossString(t *testing.T) {
	l := Loss{Kind: Lost, From: "v1", To: "v2", Object: "w-1", Path: "spec.note", Original: []byte(`"a b"`)}
	if got, want := l.String(), `lost v1→v2→v1 object=w-1 path=spec.note original="a b" after=<absent>`; got != want {
		t.Errorf("%s\nwant %s", got, want)
	}
	f := Loss{Kind: Failed, From: "v1", To: "v2", Object: "ns/w-2", Error: "converting v1 to v2: no\nway"}
	if got, want := f.String(), `failed v1→v2→v1 object=ns/w-2 error=converting v1 to v2: no way`; got != want {
		t.Errorf("%s\nwant %s", got, want)
	}
	long := Loss{Kind: Changed, From: "a", To: "b", Object: "o", Path: "p", Original: []byte(`"` + strings.Repeat("x", 500) + `"`), After: []byte(`1`)}
	if s := long.String(); len(s) > 300 || !strings.Contains(s, "…") {
		t.Errorf("a long value is not cut: %d bytes", len(s))
	}
}
