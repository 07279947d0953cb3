// Package check judges a recorded history of requests, lists and watches
// against what etcd holds, for the robustness suite (e2e/robustness).
//
// The traffic writes a unique write ID into every object it writes, so a
// state of an object is told apart by (key, resourceVersion, write ID). The
// truth is etcd's own history of the keys (Truth: every revision, read from
// etcd, not from crdserver). The checks:
//
//   - acknowledged: every answer a client got names a state etcd holds at
//     that revision (a write acknowledged and then gone, or a read of a
//     state that never was, is caught here); every state etcd holds was
//     written by a request of the traffic;
//   - linearizable: each object's history of writes and quorum reads is
//     linearizable (porcupine) in a model where a create succeeds only if
//     the object is absent, an update or delete with a resourceVersion only
//     if it matches, and a read returns the last write; writes whose answer
//     was lost are resolved from the truth (their write ID is there or not);
//   - lists: every list equals etcd's state at its resourceVersion, honours
//     resourceVersionMatch, and a consistent list is no older than the
//     writes acknowledged before it started;
//   - watches: ordered, unique, atomic, reliable (across reconnects),
//     resumable, bookmarkable and filtered, initial events of a watch list
//     ending with the k8s.io/initial-events-end bookmark, and 410 Gone only
//     for a compacted resourceVersion.
//
// Every check is exercised on doctored histories by this package's tests.
package check

import (
	"fmt"
	"net/http"
)

// Obj is one state of an object as a client was given it: enough to tell
// its states apart.
type Obj struct {
	Key     string `json:"key"` // resource/namespace/name
	Rev     int64  `json:"rev"`
	WriteID string `json:"writeID"`
	Group   string `json:"group,omitempty"` // the label the traffic selects on
}

func (o Obj) String() string {
	return fmt.Sprintf("%s@%d(%s,%s)", o.Key, o.Rev, o.WriteID, o.Group)
}

// OpKind is the verb of a request on one object.
type OpKind string

// The requests on one object the traffic makes.
const (
	Create   OpKind = "create"   // POST; fails if the object exists
	Update   OpKind = "update"   // PUT with metadata.resourceVersion IfRev
	Apply    OpKind = "apply"    // server-side apply, forced; creates if absent
	Patch    OpKind = "patch"    // merge patch, no precondition
	Delete   OpKind = "delete"   // DELETE with preconditions.resourceVersion IfRev
	Get      OpKind = "get"      // GET, a quorum read
	GetStale OpKind = "getStale" // GET with resourceVersion=0: any state the cache has
)

// IsWrite reports whether the kind changes the object.
func (k OpKind) IsWrite() bool {
	switch k {
	case Create, Update, Apply, Patch, Delete:
		return true
	}
	return false
}

// Op is one request on one object and its answer.
type Op struct {
	ID     int    `json:"id"`
	Client int    `json:"client"`
	Kind   OpKind `json:"kind"`
	Key    string `json:"key"`
	// IfRev is the resourceVersion precondition of an update or delete.
	IfRev int64 `json:"ifRev,omitempty"`
	// WriteID and Group are what a write writes (a delete writes none).
	WriteID string `json:"writeID,omitempty"`
	Group   string `json:"group,omitempty"`
	// Call and Return are nanoseconds since the run started.
	Call   int64 `json:"call"`
	Return int64 `json:"return"`
	// The answer: its HTTP status (0 when none came), the Status reason,
	// the object it carried (nil for a Status), or the transport error.
	Code    int    `json:"code"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"` // of a Status
	// Named is the name a 404's Status details carry: a 404 says the
	// object is absent only when it names it (not when the resource is
	// not served).
	Named string `json:"named,omitempty"`
	Obj   *Obj   `json:"obj,omitempty"`
	Err   string `json:"err,omitempty"`
	// Unsent: the request never left the client (its connection was
	// refused): it had no effect.
	Unsent bool `json:"unsent,omitempty"`
	// Undecodable: a success whose body is not an object.
	Undecodable bool `json:"undecodable,omitempty"`
}

// Outcome is what an answer says happened.
type Outcome string

// Outcomes of a request.
const (
	OK            Outcome = "ok"
	AlreadyExists Outcome = "alreadyExists"
	Conflict      Outcome = "conflict"
	NotFound      Outcome = "notFound"
	// Refused: a definite answer that the request had no effect and says
	// nothing of the object (429, 400, 403, 422).
	Refused Outcome = "refused"
	// Unknown: no answer, or a 5xx: the request may or may not have
	// taken effect.
	Unknown Outcome = "unknown"
)

// Outcome classifies the answer.
func (o *Op) Outcome() Outcome {
	_, _, name := SplitKey(o.Key)
	switch {
	case o.Unsent:
		return Refused
	case o.Code == 0 || o.Code >= 500:
		return Unknown
	case o.Code >= 200 && o.Code < 300:
		return OK
	case o.Code == http.StatusNotFound && o.Named == name:
		return NotFound
	case o.Code == http.StatusNotFound:
		return Refused // the resource, not the object, was not found
	case o.Code == http.StatusConflict && o.Reason == "AlreadyExists":
		return AlreadyExists
	case o.Code == http.StatusConflict:
		return Conflict
	}
	return Refused
}

func (o *Op) String() string {
	s := fmt.Sprintf("op %d (client %d) %s %s", o.ID, o.Client, o.Kind, o.Key)
	if o.IfRev != 0 {
		s += fmt.Sprintf(" if rv=%d", o.IfRev)
	}
	if o.WriteID != "" {
		s += " writing " + o.WriteID
	}
	s += fmt.Sprintf(" → %d %s", o.Code, o.Reason)
	if o.Obj != nil {
		s += " " + o.Obj.String()
	}
	if o.Err != "" {
		s += " (" + o.Err + ")"
	}
	return s
}

// Scope is what a list or a watch covers: one resource, one namespace or
// all, and the traffic's selectors.
type Scope struct {
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"` // "" for all namespaces
	// Group, when set, is the label selector group=<Group>.
	Group string `json:"group,omitempty"`
	// Name, when set, is the field selector metadata.name=<Name>.
	Name string `json:"name,omitempty"`
}

// Matches reports whether a state of the object at key is in scope.
func (s Scope) Matches(key, group string) bool {
	res, ns, name := SplitKey(key)
	if res != s.Resource || (s.Namespace != "" && ns != s.Namespace) || (s.Name != "" && name != s.Name) {
		return false
	}
	return s.Group == "" || s.Group == group
}

// InResource reports whether key is in scope's resource and namespace,
// whatever its state.
func (s Scope) InResource(key string) bool {
	res, ns, name := SplitKey(key)
	return res == s.Resource && (s.Namespace == "" || ns == s.Namespace) && (s.Name == "" || name == s.Name)
}

func (s Scope) String() string {
	out := s.Resource
	if s.Namespace != "" {
		out += " in " + s.Namespace
	}
	if s.Group != "" {
		out += " group=" + s.Group
	}
	if s.Name != "" {
		out += " metadata.name=" + s.Name
	}
	return out
}

// List is one list request, all its pages.
type List struct {
	ID     int   `json:"id"`
	Client int   `json:"client"`
	Scope  Scope `json:"scope"`
	// RV and Match are the resourceVersion and resourceVersionMatch sent
	// with the first page ("" for a consistent list); Limit the page size.
	RV    string `json:"rv,omitempty"`
	Match string `json:"match,omitempty"`
	Limit int    `json:"limit,omitempty"`
	Call  int64  `json:"call"`
	// Return is when the last page came.
	Return int64 `json:"return"`
	Pages  int   `json:"pages"`
	// Rev is the list's resourceVersion (every page's must be the same).
	Rev   int64 `json:"rev"`
	Items []Obj `json:"items"`
	// A failed page: its status (0 for a transport error), reason, error.
	// A list that failed is checked only for a 410 it should not have got.
	Code   int    `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
	Err    string `json:"err,omitempty"`
	// PageRevs are the pages' resourceVersions, when they differ.
	PageRevs []int64 `json:"pageRevs,omitempty"`
	// FailedRV is the resourceVersion the failed page was read at (the
	// continue token's), for a 410 on a later page.
	FailedRV int64 `json:"failedRV,omitempty"`
	// Undecodable: a page answered 200 is not a list.
	Undecodable bool `json:"undecodable,omitempty"`
}

// Failed reports whether the list did not complete.
func (l *List) Failed() bool { return l.Code != http.StatusOK }

// WatchEvent is one event a watch delivered.
type WatchEvent struct {
	Type string `json:"type"` // ADDED, MODIFIED, DELETED, BOOKMARK
	Obj  Obj    `json:"obj"`  // a BOOKMARK has only Rev
	// InitialEnd marks the bookmark that ends a watch list's initial
	// events.
	InitialEnd bool  `json:"initialEnd,omitempty"`
	At         int64 `json:"at"`
}

// Conn is one watch request of a logical watch.
type Conn struct {
	// RV is the resourceVersion it was sent with; SendInitial says it
	// asked for initial events (sendInitialEvents=true).
	RV          string `json:"rv"`
	SendInitial bool   `json:"sendInitial,omitempty"`
	Replica     int    `json:"replica"`
	Call        int64  `json:"call"`
	End         int64  `json:"end"`
	Events      []WatchEvent
	// How it ended: the status of a refused request or of an ERROR event
	// (Code, Reason), or a transport error, or nothing (the server or the
	// client closed it).
	Code   int    `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
	Err    string `json:"err,omitempty"`
	// Undecodable: the stream carried something that is not an event.
	Undecodable bool `json:"undecodable,omitempty"`
}

// WatchMode is how a logical watch starts.
type WatchMode string

// How watches start.
const (
	// FromRV: a watch from a resourceVersion (after a list, or one another
	// watch delivered).
	FromRV WatchMode = "fromRV"
	// WatchList: sendInitialEvents=true with resourceVersionMatch
	// NotOlderThan, as client-go's informers start.
	WatchList WatchMode = "watchList"
)

// Watch is one logical watch: the first watch request and its resumptions
// from the last resourceVersion seen, as a reflector makes them, until it
// is stopped or told to relist (410).
type Watch struct {
	ID     int       `json:"id"`
	Client int       `json:"client"`
	Scope  Scope     `json:"scope"`
	Mode   WatchMode `json:"mode"`
	// Consistent: the watch list was sent with resourceVersion "" (its
	// initial state must be no older than writes acknowledged before).
	Consistent bool `json:"consistent,omitempty"`
	// ResumeOf is the watch whose delivered resourceVersion this one
	// started from (0: none).
	ResumeOf int    `json:"resumeOf,omitempty"`
	Conns    []Conn `json:"conns"`
}

// Compaction is one etcd compaction of the run: revisions before Rev are
// gone from At on (At is when it was asked for).
type Compaction struct {
	Rev int64 `json:"rev"`
	At  int64 `json:"at"`
}

// History is everything a run's clients recorded.
type History struct {
	Ops     []Op    `json:"ops"`
	Lists   []List  `json:"lists"`
	Watches []Watch `json:"watches"`
}
