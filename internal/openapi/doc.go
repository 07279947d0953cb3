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

The built-in documents describe namespaces (core/v1) and
customresourcedefinitions (apiextensions.k8s.io/v1), plus the discovery
endpoints (/api, /apis, /apis/apiextensions.k8s.io, /version). They are
built, like kube-apiserver's, from go-restful routes laid out as its API
installer lays them out, by kube-openapi's builders; the schemas are
apiextensions-apiserver's generated definitions and Namespace definitions
of this package.

The CRD documents are built by apiextensions-apiserver's OpenAPI builder
for every served version of every Established CRD and merged per
group/version (v3) or onto the built-in document (v2).

# Laziness

Nothing is built until it is asked for. A registry Index only marks the
group/versions whose CRDs changed (by name and resourceVersion); their
documents are rebuilt on the next request for them, the others are kept
as they are, hash included. Group/versions left with no Established CRD
are removed.

# Usage

	p := openapi.New()
	reg.Subscribe(p.Sync) // every new registry Index
	mux.Handle("/openapi/", p)

Publisher is the only type. Sync is cheap and may be called under the
registry lock; ServeHTTP answers /openapi/v2, /openapi/v3 and
/openapi/v3/... and 404 for anything else.
*/
package openapi
