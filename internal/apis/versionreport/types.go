// Package versionreport serves crdserver.io/v1alpha1 VersionReports: for
// every version of every CRD, what retiring it would break, answered from
// what crdserver sees — who called it (internal/usage, every replica's
// record), which objects are stored in it (the watch cache of the CRD's
// resource), and what refers to it (managedFields entries, ownerReferences
// in objects of any resource, admission webhooks and policies whose rules
// would stop matching, ConversionRules, status.storedVersions) — with the
// verdict: removable, or each blocker and what fixes it.
//
// A VersionReport is computed when it is read, never stored: one per CRD
// version, named <version>.<crd name>, labelled crdserver.io/crd=<crd
// name>, read-only (get, list; kubectl get prints its columns).
// `crdserver versions` reads them.
package versionreport

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group, Version and the resource of the API.
const (
	Group    = "crdserver.io"
	Version  = "v1alpha1"
	Plural   = "versionreports"
	Kind     = "VersionReport"
	CRDLabel = "crdserver.io/crd"
)

// VersionReport is what retiring one version of a CRD would break.
type VersionReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec   `json:"spec"`
	Status            Status `json:"status"`
}

// VersionReportList is a list of VersionReports.
type VersionReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VersionReport `json:"items"`
}

// Spec names the version.
type Spec struct {
	CRD     string `json:"crd"`
	Group   string `json:"group"`
	Version string `json:"version"`
}

// Status is what crdserver sees of the version.
type Status struct {
	Served             bool   `json:"served"`
	Storage            bool   `json:"storage"`
	StorageVersion     string `json:"storageVersion"`
	Deprecated         bool   `json:"deprecated,omitempty"`
	DeprecationWarning string `json:"deprecationWarning,omitempty"`
	// InStoredVersions: the CRD's status.storedVersions lists it.
	InStoredVersions bool `json:"inStoredVersions,omitempty"`
	// Objects are the CRD's objects stored in this version; ObjectNames
	// the first of them (namespace/name).
	Objects     int64    `json:"objects"`
	ObjectNames []string `json:"objectNames,omitempty"`
	// Window is how far back Clients go.
	Window  string   `json:"window"`
	Clients []Client `json:"clients,omitempty"`
	// ClientsOverflow counts the requests of clients beyond those told
	// apart.
	ClientsOverflow int64      `json:"clientsOverflow,omitempty"`
	References      References `json:"references"`
	// Removable: removing the version from spec.versions breaks nothing
	// crdserver can see; otherwise Blockers say why.
	Removable bool      `json:"removable"`
	Blockers  []Blocker `json:"blockers,omitempty"`
}

// Client is one user and user agent's requests to the version.
type Client struct {
	User      string `json:"user"`
	UserAgent string `json:"userAgent,omitempty"`
	// Requests by verb (get, list, watch, create, ...).
	Requests  map[string]int64 `json:"requests"`
	FirstSeen metav1.Time      `json:"firstSeen"`
	LastSeen  metav1.Time      `json:"lastSeen"`
	// NotServed counts the requests that came while the version was not
	// served (404): a removal broke this client, or would.
	NotServed int64 `json:"notServed,omitempty"`
}

// References are what refers to the version.
type References struct {
	// ManagedFields counts objects with managedFields entries at the
	// version, by manager.
	ManagedFields []ManagedFields `json:"managedFields,omitempty"`
	// OwnerReferences counts objects whose ownerReferences name the
	// version, by resource.
	OwnerReferences []OwnerReferences `json:"ownerReferences,omitempty"`
	// Admission lists webhooks and policies whose rules would stop
	// matching the CRD's resource without the version.
	Admission []AdmissionRule `json:"admission,omitempty"`
	// ConversionRules names the CRD's ConversionRules when they name the
	// version.
	ConversionRules string `json:"conversionRules,omitempty"`
}

// ManagedFields are the objects one manager manages fields of at the
// version.
type ManagedFields struct {
	Manager string   `json:"manager"`
	Objects int64    `json:"objects"`
	Names   []string `json:"names,omitempty"`
}

// OwnerReferences are the objects of one resource owned through the
// version.
type OwnerReferences struct {
	Resource string   `json:"resource"` // resource.group
	Objects  int64    `json:"objects"`
	Names    []string `json:"names,omitempty"`
}

// AdmissionRule is a webhook or policy whose rules list the version and no
// other served version of the resource.
type AdmissionRule struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Webhook is the webhook's name in a webhook configuration.
	Webhook     string `json:"webhook,omitempty"`
	MatchPolicy string `json:"matchPolicy,omitempty"`
}

// Blocker is one reason the version cannot be removed yet, and what fixes
// it.
type Blocker struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// Reasons of blockers.
const (
	ReasonStorageVersion  = "StorageVersion"
	ReasonClients         = "Clients"
	ReasonStoredObjects   = "StoredObjects"
	ReasonManagedFields   = "ManagedFields"
	ReasonOwnerReferences = "OwnerReferences"
	ReasonAdmission       = "Admission"
	ReasonConversionRules = "ConversionRules"
	ReasonStoredVersions  = "StoredVersions"
)
