package request

import (
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Format is a response representation a client can ask for.
type Format int

const (
	// FormatJSON is the object itself as JSON.
	FormatJSON Format = iota
	// FormatYAML is the object itself as YAML.
	FormatYAML
	// FormatProtobuf is Kubernetes' protobuf encoding (built-in types).
	FormatProtobuf
)

// As names a transformed representation (the media type's as= parameter).
type As string

// Transformations of a response.
const (
	AsObject                    As = ""
	AsTable                     As = "Table"
	AsPartialObjectMetadata     As = "PartialObjectMetadata"
	AsPartialObjectMetadataList As = "PartialObjectMetadataList"
	AsAPIGroupDiscoveryList     As = "APIGroupDiscoveryList"
)

// Target is the negotiated response representation.
type Target struct {
	Format Format
	As     As
	// Group and Version of the transformed kind (meta.k8s.io/v1, ...).
	Group, Version string
	Pretty         bool
}

// ContentType is the Content-Type of a response in this representation.
func (t Target) ContentType() string {
	base := "application/json"
	switch t.Format {
	case FormatYAML:
		base = "application/yaml"
	case FormatProtobuf:
		return Protobuf
	}
	// Kubernetes names the transformation in the Content-Type of aggregated
	// discovery only; Tables and metadata come as plain JSON.
	if t.As != AsAPIGroupDiscoveryList {
		return base
	}
	return base + ";g=" + t.Group + ";v=" + t.Version + ";as=" + string(t.As)
}

// Offer says which transformations an endpoint can produce.
type Offer struct {
	// Transforms maps an as= value to the group/versions it exists in.
	Transforms map[As][]string // values are "group/version"
	// NoYAML is set for streams (watch), which have no YAML framing.
	NoYAML bool
	// Protobuf is set where the objects are of built-in types, which have
	// a protobuf encoding.
	Protobuf bool
}

// Accepted lists the media types a 406 names, as Kubernetes does.
const Accepted = "application/json, application/yaml, application/vnd.kubernetes.protobuf"

type clause struct {
	typ, sub string
	params   map[string]string
	q        float64
}

func parseAccept(header string) []clause {
	var out []clause
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		mt, params, err := mime.ParseMediaType(part)
		if err != nil {
			// Tolerate what mime rejects: take the type and drop the rest.
			mt = strings.ToLower(strings.TrimSpace(strings.SplitN(part, ";", 2)[0]))
			params = map[string]string{}
		}
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok {
			if mt != "*" {
				continue
			}
			typ, sub = "*", "*"
		}
		c := clause{typ: typ, sub: sub, params: params, q: 1}
		if q, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(q, 64); err == nil {
				c.q = f
			}
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.q != b.q {
			return a.q > b.q
		}
		if a.typ != "*" && b.typ == "*" {
			return true
		}
		return a.sub != "*" && b.sub == "*" && a.typ == b.typ
	})
	return out
}

// Negotiate picks the representation of a response from the Accept header,
// the first acceptable media type winning. It returns a 406 Status error
// when none is acceptable.
func Negotiate(r *http.Request, offer Offer) (Target, error) {
	header := r.Header.Get("Accept")
	pretty := isPretty(r)
	if strings.TrimSpace(header) == "" {
		return Target{Format: FormatJSON, Pretty: pretty}, nil
	}
	for _, c := range parseAccept(header) {
		if c.q <= 0 {
			continue
		}
		t := Target{Pretty: pretty}
		switch {
		case c.typ == "*" && c.sub == "*", c.typ == "application" && (c.sub == "*" || c.sub == "json"):
			t.Format = FormatJSON
		case c.typ == "application" && c.sub == "yaml":
			if offer.NoYAML {
				continue
			}
			t.Format = FormatYAML
		case c.typ == "application" && c.sub == "vnd.kubernetes.protobuf":
			// Tables have no protobuf encoding, as in Kubernetes.
			if !offer.Protobuf || As(c.params["as"]) == AsTable {
				continue
			}
			t.Format = FormatProtobuf
		default:
			continue
		}
		if p, ok := c.params["pretty"]; ok && (p == "1" || p == "true") {
			t.Pretty = true
		}
		as := As(c.params["as"])
		if as != AsObject {
			gvs, ok := offer.Transforms[as]
			if !ok {
				continue
			}
			gv := c.params["g"] + "/" + c.params["v"]
			found := false
			for _, x := range gvs {
				if x == gv {
					found = true
					break
				}
			}
			if !found {
				continue
			}
			t.As, t.Group, t.Version = as, c.params["g"], c.params["v"]
		}
		return t, nil
	}
	return Target{}, NewStatusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable, "only the following media types are accepted: "+Accepted)
}

func isPretty(r *http.Request) bool {
	if p := r.URL.Query().Get("pretty"); p != "" {
		b, err := strconv.ParseBool(p)
		return err == nil && b
	}
	ua := r.UserAgent()
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget") || strings.HasPrefix(ua, "Mozilla/5.0")
}
