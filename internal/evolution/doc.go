// Package evolution finds the changes between two revisions of a
// CustomResourceDefinition that break its clients or its stored objects,
// following Kubernetes' deprecation policy for APIs (rule 1: an API
// element is removed only with a new API version; rule 3: a version is
// deprecated only in favour of one as stable; rule 4: a served version
// stops being served only after a deprecation; the storage version does
// not go back in stability nor jump to a version the old revision did not
// serve).
//
//	findings := evolution.CheckCRD(ctx, old, new, evolution.Options{})
//	fmt.Print(evolution.FormatText(findings))
//
// A finding is a break (SeverityBreaking) unless it says otherwise:
// findings of SeverityInfo (a change worth knowing that breaks nothing)
// are returned only with Options.Info, and FormatText starts their
// message with "info: ".
//
// CheckCRD compares every version served by both revisions field by field
// (on the apiextensions.k8s.io/v1 JSONSchemaProps, through properties,
// items and additionalProperties), the versions' served, deprecated and
// storage flags, and the CRD's scope and names. Additions are never
// findings: new optional fields, new versions, wider limits, more enum
// values, removed constraints.
//
// # Paths
//
// A finding's Path is where in an object of that version the change is,
// in the style of kubectl explain and CEL field paths:
//
//	.                       the object itself (a rule on the root schema)
//	.spec.replicas          a property
//	.spec.ports[*].name     a property of every item of an array
//	.metadata.labels[*]     every value of a map (additionalProperties)
//	.spec["a.b"]            a property whose name is not a plain word
//	.metadata.name          an object's name (compared even where a schema does not list it)
//
// Path is "" for findings about a version as a whole or about the CRD;
// Version is "" for findings about the CRD as a whole (scope, names).
//
// # Rules
//
// Schema of a version served before and after the change (Path set):
//
//	field-removed                  a property is gone (a rename shows as a removal)
//	type-changed                   the type changed (to anything but an untyped "any value"),
//	                               int-or-string was turned off, or nullable was turned off
//	required-added                 a field became required (without a default to fill it)
//	enum-narrowed                  an enum lost values, or a field without one got one
//	pattern-changed                a pattern was added or changed
//	format-changed                 a format was added or changed
//	minimum-raised                 minimum added or raised, or made exclusive
//	maximum-lowered                maximum added or lowered, or made exclusive
//	multipleof-changed             multipleOf added, or changed to one the old one is not a multiple of
//	maxlength-lowered              maxLength added or lowered
//	minlength-raised               minLength raised
//	maxitems-lowered               maxItems added or lowered
//	minitems-raised                minItems raised
//	maxproperties-lowered          maxProperties added or lowered
//	minproperties-raised           minProperties raised
//	cel-rule-added                 a new x-kubernetes-validations rule (by its rule text)
//	combinator-narrowed            a new allOf entry, a new or narrower anyOf, a new or changed oneOf or not
//	list-type-changed              x-kubernetes-list-type changed (unset is atomic)
//	list-map-keys-changed          x-kubernetes-list-map-keys of a map list changed
//	map-type-changed               x-kubernetes-map-type changed (unset is granular)
//	preserve-unknown-fields-removed x-kubernetes-preserve-unknown-fields turned off: unknown fields are now pruned
//	additional-properties-narrowed additionalProperties no longer allows what it did
//	embedded-resource-changed      x-kubernetes-embedded-resource turned on or off
//	default-changed                a default added to, changed on or removed from an existing field
//
// apiVersion, kind and metadata dropped from the root schema are not
// field-removed: every object has them. The allOf entries that only
// constrain the node's own value (enum, bounds, lengths, counts, pattern,
// format, multipleOf, required, CEL rules) are constraints of the node:
// they are merged into it before comparing, so an allOf enum folded into
// a plain enum of the same values is no change, and a new allOf maximum
// is maximum-lowered. The rest of allOf, anyOf, oneOf and not are
// compared as wholes (documentation aside), not field by field.
//
// A default added to a field whose old description already stated it
// ("Defaults to 80.") is default-changed of SeverityInfo: it writes down
// what clients and the controller assumed. Any other default added,
// changed or removed is a break.
//
// Versions (Version is the version concerned, for the storage rules the
// new storage version; Path is "" except for selectable fields):
//
//	served-version-removed               a served version left spec.versions without being deprecated first
//	version-unserved-without-deprecation a served version set served: false without being deprecated first
//	deprecated-for-less-stable           a version newly deprecated while no other served, non-deprecated
//	                                     version is as stable (GA > beta > alpha > other names); not
//	                                     when every served version is deprecated (the API is retired),
//	                                     nor when the deprecation warning names a replacement in
//	                                     another group ("use gateway.networking.k8s.io/v1 ...")
//	storage-moved-to-less-stable         the storage version moved to a less stable version; not when
//	                                     that version was served with the old storage version's schema
//	                                     and keeps it (stored objects keep their shape: this is how a
//	                                     project takes back a storage move made too early)
//	storage-moved-to-new-version         the storage version moved to a version the old revision did not serve
//	subresource-removed                  the status or scale subresource of a served version is gone
//	scale-paths-changed                  the scale subresource's replicas or selector paths changed
//	selectable-field-removed             a selectable field is gone (Path is its JSON path)
//
// The CRD (Version "" and Path ""):
//
//	scope-changed       Namespaced ↔ Cluster
//	group-changed       the API group changed
//	plural-changed      the resource (plural) name changed
//	kind-changed        the kind changed
//	listkind-changed    the list kind changed (unset is <kind>List)
//	singular-changed    the singular name changed (unset is the kind in lower case)
//	shortname-removed   a short name is gone
//	category-removed    a category (such as all) is gone
//
// # Versions that share objects
//
// Without a conversion webhook (strategy None, or none given), an object
// is stored as it was written and read through every served version as
// it is: a client may create it through one version and read and update
// it through another. CheckCRD therefore compares, in the new revision,
// every served version's schema with every other's, as a change from the
// version written through (Finding.Across) to the version updated
// through (Finding.Version): a constraint or type rule (required-added,
// enum-narrowed, the bounds, lengths and counts, pattern-changed,
// format-changed, cel-rule-added, combinator-narrowed, type-changed)
// means the one version refuses objects the other accepts. An object
// created through v1alpha2 with 16 rules cannot be updated through a v1
// that allows 1. Fields only one version lists are not findings (the
// other version prunes them on reads, it does not refuse them), nor are
// list and map types (an unset x-kubernetes-list-type is atomic).
//
// Only differences this revision brings are reported: a difference the
// old revision already had between the same two versions (both served,
// without a conversion webhook) is left out, since the change under
// review did not cause it and reporting it on every later revision would
// bury the new ones; so is a difference that the version's own
// comparison already reports (the same rule, version and path). A new
// version that refuses what an existing one accepts, one version widened
// alone, a webhook dropped: those are reported.
//
// # Fields new in this revision
//
// A stored object, read with the old schema, holds at a node only the
// properties the old schema lists there (unknown fields are pruned),
// unless the node keeps unknown fields, is a map or an embedded resource.
// Without stored objects to check (no Options.ExistingObjects: file to
// file), a new combinator (allOf entry, anyOf, oneOf, not) that only looks
// at properties new at its node is decided on an object without them, and
// a new CEL rule that reads self only as self.x, has(self.x) or self.?x
// (no oldSelf) is run, with Kubernetes' CEL library, on an object without
// the new properties and with the others unknown (partial evaluation): it
// is left out only when it holds whatever they are.
// "!has(self.mode) || self.mode != 'x'", "!(has(self.a) && has(self.b))"
// and "!(has(self.cors) && self.type != 'CORS')" with mode, a, b and cors
// new are no findings; "self.mode == 'a'", a rule on existing fields
// only and oneOf [{required: [a]}, {required: [b]}] are.
// Constraints on a property that is itself new are never compared (only
// what the old revision has is). With Options.ExistingObjects the stored
// objects decide instead, as below: this static judgement never replaces
// them.
//
// # Existing objects
//
// With Options.ExistingObjects, the constraints that existing objects may
// fail (required-added, enum-narrowed, pattern-changed, format-changed,
// the minimum, maximum, multipleOf and length, items and properties
// limits, cel-rule-added and combinator-narrowed) are reported only when
// one of the version's objects fails them: each object is pruned and
// defaulted as the server would on a read, then validated with the new
// and with the old schema (internal/schema, Kubernetes' own validators and
// CEL); an error the new schema finds and the old one does not, at the
// finding's path, counts against it. The message then says how many
// objects fail and names one. CEL transition rules (those using oldSelf)
// only constrain updates, so no existing object fails them. The same
// holds for differences between versions that share objects: the stored
// objects, as the old revision reads them, are validated with the
// stricter version's schema and with the laxer one's.
//
// # Not checked
//
// What two revisions cannot show: rule 2 (objects round-trip between
// versions: a matter of the conversion webhook) and rule 4a's timing
// (how long a deprecated beta stays served); whether a default added
// matches what a controller assumed, other than by the description.
// Also left out: conversion strategy and webhook changes, printer
// columns, descriptions, CEL rule messages (rules compare by their text);
// a cross-version rule another constraint makes moot (a uniqueness rule
// over a list the other version caps at one item); fields
// newly described under x-kubernetes-preserve-unknown-fields (an
// addition, though stored unknown values may not fit them); what is
// inside allOf, anyOf, oneOf and not field by field; keywords a
// structural schema forbids (uniqueItems, patternProperties,
// dependencies, additionalItems, definitions, $ref).
package evolution
