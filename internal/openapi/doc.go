/*
Package openapi publishes crdserver's OpenAPI documents the way
kube-apiserver does, so that kubectl and client-go can use them:

  - /openapi/v3 lists one document per API path ("api/v1",
    "apis/apiextensions.k8s.io/v1", "apis/<crd group>/<version>", ...),
    each with a serverRelativeURL whose hash parameter changes when, and
    only when, the document does.
  - /openapi/v3/<path> serves one document, as JSON or protobuf; with a
    hash it is immutable (cacheable for a year), with a stale hash it
    redirects to the current one.
  - /openapi/v2 serves a single document of everything, as JSON or
    protobuf (kubectl apply and explain read it).

kubectl relies on details of these documents: apply looks for the
fieldValidation query parameter on the PATCH operation of a kind
(x-kubernetes-group-version-kind), and computes a strategic merge patch
only when that operation accepts application/strategic-merge-patch+json.

# Documents

The built-in documents describe the built-in resources New is given (a
server's Builtin.All): one document per group/version ("api/v1",
"apis/rbac.authorization.k8s.io/v1", ...) and the discovery endpoints
(/api, /apis, /apis/<group>, /version). They are built, like
kube-apiserver's, from go-restful routes laid out as its API installer
lays them out (routes.go), by kube-openapi's builders. A resource's
routes follow its Verbs (create-only reviews get a POST only, PATCH
offers strategic merge patch only with a StrategicMergeType), its
status, finalize and own subresources (serviceaccounts/token takes and
returns an authentication.k8s.io/v1 TokenRequest); its Go types come
from a scheme of the built-in groups (scheme.go).

The schemas of the meta and apiextensions types are apiextensions-
apiserver's generated definitions. Those of the k8s.io/api types, whose
generated definitions only k8s.io/kubernetes has, are made by reflection
(typed.go) the way openapi-gen makes them: properties from json tags,
descriptions from SwaggerDoc, patch strategies from struct tags, list
and map types and defaults from client-go's structured-merge-diff schema
(listtypes.go), and what only comments say from a short table
(comments.go).

Compared with kube-apiserver v1.37.2's documents, field by field, they
differ only where crdserver does (no strategic merge patch for RBAC,
CRDs and StorageVersionMigrations; a deleted ServiceAccount answers a
Status; storagemigration.k8s.io/v1beta1 is served;
the meta types' x-kubernetes-group-version-kind in the v2 document list
only crdserver's groups) and in this: the lists of authentication.k8s.io
and authorization.k8s.io types (TokenRequestSpec.audiences,
UserInfo.groups, ResourceRule.verbs, ...) have no x-kubernetes-list-type
(atomic in Kubernetes), as client-go's schema, the only exported source
of list types, has no types that cannot be applied.

The CRD documents are built by apiextensions-apiserver's OpenAPI builder
for every served version of every Established CRD and merged per
group/version (v3) or onto the built-in document (v2).

# Laziness

Nothing is built until it is asked for: New only lists the built-in
documents (tens of microseconds); the routes and definitions of a
document, and the document, are made on its first request (about 4ms
for api/v1, 30ms for the whole v2 document). A registry Index only marks
the group/versions whose CRDs changed (by name and resourceVersion);
their documents are rebuilt on the next request for them, the others are
kept as they are, hash included. Group/versions left with no Established
CRD are removed.

# Usage

	p := openapi.New(builtin.All)
	reg.Subscribe(p.Sync) // every new registry Index
	mux.Handle("/openapi/", p)

Publisher is the only type. Sync is cheap and may be called under the
registry lock; ServeHTTP answers /openapi/v2, /openapi/v3 and
/openapi/v3/... and 404 for anything else.
*/
package openapi
