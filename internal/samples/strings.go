package samples

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// plainStrings are the strings a string field without format or pattern
// may get, besides random ones: each is a way a conversion may lose
// something (leading zeros, case, spaces, unicode, a type of its own).
var plainStrings = []string{
	"", "0", "007", "00", "-1", "3.50", "1e3", "0x1F", "true", "null",
	"a", "MiXeD Case", " padded ", "Ünïcødé ✓", "日本語", "a.b-c_d", "x/y",
}

// plainRunes are the characters of random strings.
var plainRunes = []rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_.éüß日本✓")

// str makes a string within the format or pattern, minLength and
// maxLength (in characters) of s.
func (g *generator) str(s *structuralschema.Structural) (any, bool) {
	vv := valueValidation(s)
	lo, hi := 0, -1
	if vv.MinLength != nil {
		lo = int(*vv.MinLength)
	}
	if vv.MaxLength != nil {
		hi = int(*vv.MaxLength)
	}
	if hi >= 0 && hi < lo {
		return nil, false
	}
	fits := func(s string) bool {
		n := utf8.RuneCountInString(s)
		return n >= lo && (hi < 0 || n <= hi)
	}
	format := strings.ReplaceAll(vv.Format, "-", "")
	for try := range 10 {
		var v string
		switch {
		case formats[format] != nil:
			v = formats[format](g)
		case vv.Pattern != "":
			var ok bool
			if v, ok = g.pattern(vv.Pattern, try); !ok {
				continue
			}
		default:
			v = g.plainString(lo, hi, fits)
		}
		if fits(v) {
			return v, true
		}
	}
	return nil, false
}

// plainString is one of plainStrings that fits, or a random string.
func (g *generator) plainString(lo, hi int, fits func(string) bool) string {
	if g.chance(0.5) {
		var fit []string
		for _, s := range plainStrings {
			if fits(s) {
				fit = append(fit, s)
			}
		}
		if len(fit) > 0 {
			return pick(g, fit)
		}
	}
	top := lo + 12
	if hi >= 0 && hi < top {
		top = hi
	}
	n := lo + g.rng.IntN(top-lo+1)
	var b strings.Builder
	for range n {
		b.WriteRune(pick(g, plainRunes))
	}
	return b.String()
}

// formats makes strings of the formats Kubernetes validates (named as
// kube-openapi normalizes them, without dashes).
var formats = map[string]func(*generator) string{
	"datetime": func(g *generator) string {
		s := fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d", 1970+g.rng.IntN(130), 1+g.rng.IntN(12), 1+g.rng.IntN(28), g.rng.IntN(24), g.rng.IntN(60), g.rng.IntN(60))
		switch g.rng.IntN(4) {
		case 0:
			return s + "Z"
		case 1:
			return s + "." + digits(g, 1+g.rng.IntN(9)) + "Z"
		case 2:
			return s + pick(g, []string{"+05:30", "-08:00", "+00:00"})
		}
		return pick(g, []string{"2024-02-29T23:59:59.999999999Z", "2000-01-01T00:00:00.000+01:00", "2024-06-30T12:00:00.100Z"})
	},
	"date": func(g *generator) string {
		if g.chance(0.2) {
			return "2024-02-29"
		}
		return fmt.Sprintf("%04d-%02d-%02d", 1970+g.rng.IntN(130), 1+g.rng.IntN(12), 1+g.rng.IntN(28))
	},
	"byte": func(g *generator) string {
		b := make([]byte, 1+g.rng.IntN(12))
		for i := range b {
			b[i] = byte(g.rng.IntN(256))
		}
		return base64.StdEncoding.EncodeToString(b)
	},
	"uuid":  func(g *generator) string { return uuid(g, 0) },
	"uuid3": func(g *generator) string { return uuid(g, 3) },
	"uuid4": func(g *generator) string { return uuid(g, 4) },
	"uuid5": func(g *generator) string { return uuid(g, 5) },
	"email": func(g *generator) string {
		return pick(g, []string{"user", "a.b", "first+tag", "x_y", "007"}) + "@" + pick(g, []string{"example.com", "mail.example.org"})
	},
	"hostname": func(g *generator) string {
		return pick(g, []string{"localhost", "example.com", "my-host.example.org", "x1", "a-b.example"})
	},
	"ipv4": func(g *generator) string {
		return fmt.Sprintf("%d.%d.%d.%d", g.rng.IntN(256), g.rng.IntN(256), g.rng.IntN(256), g.rng.IntN(256))
	},
	"ipv6": func(g *generator) string {
		return pick(g, []string{"::1", "2001:db8::1", "fe80::1", "2001:0db8:0000:0000:0000:0000:0000:0001", "2001:DB8::A", "::ffff:192.0.2.1"})
	},
	"cidr": func(g *generator) string {
		return pick(g, []string{"10.0.0.0/8", "192.168.1.0/24", "10.1.2.3/16", "2001:db8::/32", "0.0.0.0/0"})
	},
	"mac": func(g *generator) string {
		f, sep := "%02x", ":"
		if g.chance(0.3) {
			f, sep = "%02X", "-"
		}
		parts := make([]string, 6)
		for i := range parts {
			parts[i] = fmt.Sprintf(f, g.rng.IntN(256))
		}
		return strings.Join(parts, sep)
	},
	"uri": func(g *generator) string {
		return pick(g, []string{"https://example.com/a/b?q=1#frag", "http://localhost:8080", "https://example.com", "urn:isbn:0451450523", "https://example.com/%7Euser"})
	},
	"duration": func(g *generator) string {
		return pick(g, []string{"1h30m", "22ns", "0s", "1.5h", "90s", "100ms", "3m0s"})
	},
	"hexcolor": func(g *generator) string { return pick(g, []string{"#FFFFFF", "#abc", "#0a0B0c", "#000"}) },
	"rgbcolor": func(g *generator) string {
		return fmt.Sprintf("rgb(%d,%d,%d)", g.rng.IntN(256), g.rng.IntN(256), g.rng.IntN(256))
	},
	"bsonobjectid": func(g *generator) string { return hex(g, 24) },
	"isbn":         func(g *generator) string { return pick(g, []string{"0321751043", "978-0321751041"}) },
	"isbn10":       func(*generator) string { return "0321751043" },
	"isbn13":       func(*generator) string { return "978-0321751041" },
	"creditcard":   func(g *generator) string { return pick(g, []string{"4111111111111111", "5500000000000004"}) },
	"ssn":          func(g *generator) string { return pick(g, []string{"123-45-6789", "078-05-1120"}) },
	"password":     func(g *generator) string { return pick(g, []string{"", "s3cr3t", "pass word", "Ünï✓"}) },
	"k8sshortname": func(g *generator) string { return pick(g, []string{"a", "web-1", "x0", "007"}) },
	"k8slongname":  func(g *generator) string { return pick(g, []string{"a", "web-1.example.com", "x.y.z", "007"}) },
}

func digits(g *generator, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + g.rng.IntN(10))
	}
	return string(b)
}

func hex(g *generator, n int) string {
	const h = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = h[g.rng.IntN(16)]
	}
	return string(b)
}

// uuid makes a UUID of a version (0: any), sometimes in upper case.
func uuid(g *generator, version int) string {
	s := []byte(hex(g, 32))
	if version > 0 {
		s[12] = byte('0' + version)
		s[16] = "89ab"[g.rng.IntN(4)]
	}
	out := fmt.Sprintf("%s-%s-%s-%s-%s", s[0:8], s[8:12], s[12:16], s[16:20], s[20:32])
	if version == 0 && g.chance(0.25) {
		out = strings.ToUpper(out)
	}
	return out
}

// pattern makes a string that pattern matches: built from the syntax tree
// of the regular expression (repetitions longer on later tries), digits
// sometimes given leading zeros, and checked with the regular expression
// itself (unanchored, as Kubernetes checks it).
func (g *generator) pattern(pattern string, try int) (string, bool) {
	c, ok := g.patterns[pattern]
	if !ok {
		c = &compiledPattern{}
		if re, err := regexp.Compile(pattern); err == nil {
			if tree, err := syntax.Parse(pattern, syntax.Perl); err == nil {
				c.re, c.tree = re, tree
			}
		}
		g.patterns[pattern] = c
	}
	re, tree := c.re, c.tree
	if re == nil {
		return "", false
	}
	stretch := []int{3, 3, 6, 10, 20, 40}[min(try, 5)]
	for range 5 {
		var b strings.Builder
		if !g.regex(tree, &b, stretch, 0) {
			continue
		}
		s := b.String()
		if g.chance(0.35) {
			s = leadingZeros(s, re)
		}
		if re.MatchString(s) {
			return s, true
		}
	}
	return "", false
}

// compiledPattern is a pattern compiled once; nil fields if it does not
// compile.
type compiledPattern struct {
	re   *regexp.Regexp
	tree *syntax.Regexp
}

// leadingZeros puts "00" or "0" before the first run of digits of s if
// re still matches it.
func leadingZeros(s string, re *regexp.Regexp) string {
	i := strings.IndexAny(s, "0123456789")
	if i < 0 {
		return s
	}
	for _, z := range []string{"00", "0"} {
		if c := s[:i] + z + s[i:]; re.MatchString(c) {
			return c
		}
	}
	return s
}

// maxPatternBytes bounds a string made from a pattern.
const maxPatternBytes = 4096

// regex writes a string matched by re into b; false if it cannot.
func (g *generator) regex(re *syntax.Regexp, b *strings.Builder, stretch, depth int) bool {
	if depth > 100 || b.Len() > maxPatternBytes {
		return false
	}
	repeat := func(lo, hi int) bool {
		if hi < 0 || hi > lo+stretch {
			hi = lo + stretch
		}
		n := lo + g.rng.IntN(hi-lo+1)
		for range n {
			if !g.regex(re.Sub[0], b, stretch, depth+1) {
				return false
			}
		}
		return true
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return false
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		// Assertions write nothing; the final match tells whether they
		// hold.
		return true
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			b.WriteRune(r)
		}
		return true
	case syntax.OpCharClass:
		r, ok := g.classRune(re.Rune)
		if ok {
			b.WriteRune(r)
		}
		return ok
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		b.WriteRune(pick(g, classRunes))
		return true
	case syntax.OpCapture:
		return g.regex(re.Sub[0], b, stretch, depth+1)
	case syntax.OpStar:
		return repeat(0, -1)
	case syntax.OpPlus:
		return repeat(1, -1)
	case syntax.OpQuest:
		return repeat(0, 1)
	case syntax.OpRepeat:
		return repeat(re.Min, re.Max)
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !g.regex(sub, b, stretch, depth+1) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		return g.regex(pick(g, re.Sub), b, stretch, depth+1)
	}
	return false
}

// classRunes are the characters preferred for character classes.
var classRunes = []rune("abcdefghijklmnopqrstuvwxyzABCDEFXYZ0123456789-_.:/@+ éüß日本✓")

// classRune picks a character of a class (pairs of low and high runes):
// one of classRunes if the class has some, else a printable one of its
// ranges.
func (g *generator) classRune(ranges []rune) (rune, bool) {
	if len(ranges) < 2 {
		return 0, false
	}
	in := func(r rune) bool {
		for i := 0; i+1 < len(ranges); i += 2 {
			if r >= ranges[i] && r <= ranges[i+1] {
				return true
			}
		}
		return false
	}
	if g.chance(0.9) {
		var fit []rune
		for _, r := range classRunes {
			if in(r) {
				fit = append(fit, r)
			}
		}
		if len(fit) > 0 {
			return pick(g, fit), true
		}
	}
	for try := range 20 {
		i := 2 * g.rng.IntN(len(ranges)/2)
		lo, hi := ranges[i], ranges[i+1]
		if hi-lo > 255 {
			hi = lo + 255
		}
		r := lo + rune(g.rng.IntN(int(hi-lo)+1))
		if !utf8.ValidRune(r) {
			continue
		}
		if try < 15 && !unicode.IsPrint(r) {
			continue
		}
		return r, true
	}
	return 0, false
}
