// Package samples makes valid sample objects of a CRD version from its
// structural schema, to exercise what reads them: a conversion's round
// trip (internal/roundtrip), a schema change.
//
//	objs, err := samples.Generate(ctx, crd, "v1", 20, 1) // 20 objects, seed 1
//
// Every object has apiVersion, kind and a distinct metadata.name
// (<kind>-<version>-NNN, namespace "default" for a namespaced CRD) and is
// valid as crdserver would take it on a create: pruned, defaulted and
// validated with crdserver's own compiled schema (internal/schema:
// OpenAPI validation, list types, embedded resources and CEL rules). The
// values at the paths validation reports are made again (up to 10 times:
// a CEL rule of spec.source remakes spec.source, not the object), then the
// whole object is, up to 50 times, and then it is dropped; Generate fails
// only when it can make none. The same CRD, version, n and seed give the
// same objects.
//
// Values vary on purpose so that lossy conversions show up: strings
// include "", "0", "007", unicode, spaces and strings that look like
// numbers, booleans or null; integers include 0, negatives, 2³¹−1 and,
// for int64, 2⁵³+1 (lost through a float64); numbers include 0.1 and
// 0.30000000000000004; date-times come with fractions and offsets; uuids
// sometimes in upper case; ipv6 addresses sometimes not canonical.
//
// What the schema says and how it is honoured:
//
//   - types (object, array, string, integer, number, boolean), nullable
//     (sometimes null), x-kubernetes-int-or-string (integers and strings);
//   - required properties always, optional ones about half the time (less
//     deep down), properties with a default sometimes left out so that the
//     default applies;
//   - enum (a random member); minimum, maximum, exclusiveMinimum,
//     exclusiveMaximum and multipleOf for integers and numbers; formats
//     int32, int64, float, double;
//   - minLength and maxLength (in characters); pattern: a string is built
//     from the regular expression's syntax tree (literals, classes,
//     alternations, repetitions, groups; Go's RE2 syntax, as Kubernetes),
//     sometimes with leading zeros added to its digits, and kept only if
//     the regular expression matches it;
//   - string formats date-time, date, byte, uuid, uuid3, uuid4, uuid5,
//     email, hostname, ipv4, ipv6, cidr, mac, uri, duration, hexcolor,
//     rgbcolor, bsonobjectid, isbn, isbn10, isbn13, creditcard, ssn,
//     password, k8s-short-name and k8s-long-name; an unknown format (which
//     Kubernetes ignores) gets any string;
//   - minItems and maxItems; uniqueItems and x-kubernetes-list-type set
//     (distinct items) and map (distinct x-kubernetes-list-map-keys, with
//     their defaults);
//   - maps (additionalProperties) with minProperties and maxProperties, and
//     keys such as "007", "x.y" and unicode ones;
//   - x-kubernetes-embedded-resource: an apiVersion, kind and
//     metadata.name, and the declared properties;
//   - x-kubernetes-preserve-unknown-fields: the declared properties only
//     (no unknown fields); an object or value without a declared structure
//     is left empty ({});
//   - anyOf and oneOf whose branches require properties: the properties
//     of one branch are present.
//
// Not supported by construction, only through validation and the
// repairs above: x-kubernetes-validations CEL rules (the generator does
// not read them), allOf, not, the value validations of anyOf/oneOf other
// than required, minProperties and maxProperties of objects with declared
// properties, patterns with word boundaries or anchors inside the
// expression, a pattern together with a format. Not supported at all:
// constraints on metadata.name in the root schema (names are fixed), and
// versions without a schema.
package samples
