package retire

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"

	"github.com/crdserver/crdserver/internal/apis/versionreport"
)

// Options say which version to retire and how far to go.
type Options struct {
	// CRD is the CRD's name (<plural>.<group>), Version the version.
	CRD, Version string
	// DryRun says what each step would do, and does nothing.
	DryRun bool
	// IgnoreClients are clients whose calls do not hold the retirement
	// back: a client is ignored when its user is one of them, or its
	// user agent starts with one of them.
	IgnoreClients []string
	// Remove deletes the version from spec.versions once it is retired
	// and no request reached it for Grace (ignored clients' too; a grace
	// longer than the server's usage window reaches back only as far as
	// the window).
	Remove bool
	Grace  time.Duration
	// Out is told each step and the progress of long ones.
	Out io.Writer
	// Settle is how long a step waits for the server's reports to show
	// what an earlier step did (the caches follow etcd closely); 30 s if
	// zero.
	Settle time.Duration
}

// Stopped is the answer when a step is not safe: what it found, and what
// fixes it. Nothing after that step was done.
type Stopped struct {
	Step, Message, Fix string
}

func (s *Stopped) Error() string {
	return fmt.Sprintf("stopped at %s: %s\n  fix: %s", s.Step, s.Message, s.Fix)
}

// The steps, in their order.
const (
	StepStorage         = "storage version"
	StepClients         = "clients"
	StepAdmission       = "admission"
	StepMigrate         = "stored objects"
	StepManagedFields   = "managedFields"
	StepOwnerReferences = "ownerReferences"
	StepStoredVersions  = "storedVersions"
	StepServed          = "served"
	StepRemove          = "remove"
)

// Retire walks the retirement of one version of a CRD and stops at the
// first step that is not safe (a *Stopped error). A step already done is
// told and skipped.
func (c *Client) Retire(ctx context.Context, o Options) error {
	if o.Settle == 0 {
		o.Settle = 30 * time.Second
	}
	w := &walk{c: c, o: o}
	crd, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, o.CRD, metav1.GetOptions{})
	if err != nil {
		return err
	}
	w.group, w.plural, w.kind = crd.Spec.Group, crd.Spec.Names.Plural, crd.Spec.Names.Kind
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			w.storage = v.Name
		}
	}
	rep, err := c.report(ctx, o.CRD, o.Version)
	if err != nil {
		return err
	}
	if rep == nil {
		if o.Remove {
			// Removed already (by an earlier run that ended after it).
			w.done(StepRemove, "%s has no version %s in spec.versions or status.storedVersions", o.CRD, o.Version)
			return nil
		}
		return fmt.Errorf("%s has no version %s (in spec.versions or status.storedVersions)", o.CRD, o.Version)
	}
	w.rep = rep
	if o.DryRun {
		w.say("dry run: nothing is changed")
	}
	for _, step := range []func(context.Context) error{
		w.checkStorage, w.checkClients, w.checkAdmission,
		w.migrate, w.rewriteManagedFields, w.rewriteOwnerReferences,
		w.dropStoredVersion, w.stopServing, w.remove,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// walk is one retirement's state.
type walk struct {
	c                             *Client
	o                             Options
	group, plural, kind, storage  string
	rep                           *versionreport.VersionReport
	migrated, rewroteMF, rewroteO bool
}

func (w *walk) say(format string, args ...any) {
	fmt.Fprintf(w.o.Out, format+"\n", args...)
}

func (w *walk) done(step, format string, args ...any) {
	w.say("%-16s %s", step+":", fmt.Sprintf(format, args...))
}

func (w *walk) would(step, format string, args ...any) {
	w.say("%-16s would %s", step+":", fmt.Sprintf(format, args...))
}

func (w *walk) gv(version string) string { return w.group + "/" + version }

// refresh reads the report again until ok says it shows what was done,
// for at most Settle.
func (w *walk) refresh(ctx context.Context, ok func(*versionreport.VersionReport) bool) error {
	deadline := time.Now().Add(w.o.Settle)
	for {
		rep, err := w.c.report(ctx, w.o.CRD, w.o.Version)
		if err != nil {
			return err
		}
		if rep == nil {
			return fmt.Errorf("%s has no version %s any more", w.o.CRD, w.o.Version)
		}
		w.rep = rep
		if ok(rep) || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (w *walk) checkStorage(context.Context) error {
	if w.rep.Status.Storage {
		return &Stopped{Step: StepStorage, Message: fmt.Sprintf("%s is the storage version of %s", w.o.Version, w.o.CRD),
			Fix: "make another served version the storage version (storage: true), then retire " + w.o.Version}
	}
	w.done(StepStorage, "%s is the storage version", w.storage)
	return nil
}

// ignored says whether a client's calls do not hold the retirement back.
func (w *walk) ignored(cl versionreport.Client) bool {
	for _, name := range w.o.IgnoreClients {
		if cl.User == name || (cl.UserAgent != "" && strings.HasPrefix(cl.UserAgent, name)) {
			return true
		}
	}
	return false
}

func describe(cl versionreport.Client) string {
	s := cl.User
	if cl.UserAgent != "" {
		s += " (" + cl.UserAgent + ")"
	}
	var verbs []string
	for v, n := range cl.Requests {
		verbs = append(verbs, fmt.Sprintf("%s %d", v, n))
	}
	slices.Sort(verbs)
	s += ": " + strings.Join(verbs, ", ") + ", last " + cl.LastSeen.UTC().Format(time.RFC3339)
	if cl.NotServed > 0 {
		s += fmt.Sprintf(", %d while not served", cl.NotServed)
	}
	return s
}

func (w *walk) checkClients(context.Context) error {
	st := &w.rep.Status
	var calling, ignored []string
	for _, cl := range st.Clients {
		if w.ignored(cl) {
			ignored = append(ignored, describe(cl))
		} else {
			calling = append(calling, describe(cl))
		}
	}
	if st.ClientsOverflow > 0 {
		calling = append(calling, fmt.Sprintf("%d requests of more clients than are told apart", st.ClientsOverflow))
	}
	if len(calling) > 0 {
		return &Stopped{Step: StepClients,
			Message: fmt.Sprintf("clients called %s within the window (%s):\n  - %s", w.o.Version, st.Window, strings.Join(calling, "\n  - ")),
			Fix: fmt.Sprintf("move them to %s and wait for the window to pass (or retire anyway past the clients you name with --ignore-client USER-OR-AGENT)",
				w.storage)}
	}
	if len(ignored) > 0 {
		w.done(StepClients, "none within %s but those ignored: %s", st.Window, strings.Join(ignored, "; "))
		return nil
	}
	w.done(StepClients, "none within %s", st.Window)
	return nil
}

func (w *walk) checkAdmission(context.Context) error {
	adm := w.rep.Status.References.Admission
	if len(adm) == 0 {
		w.done(StepAdmission, "no webhook or policy would stop matching %s", w.plural)
		return nil
	}
	var what []string
	for _, a := range adm {
		s := a.Kind + " " + a.Name
		if a.Webhook != "" {
			s += " (webhook " + a.Webhook + ")"
		}
		if a.MatchPolicy != "" {
			s += ", matchPolicy " + a.MatchPolicy
		}
		what = append(what, s)
	}
	return &Stopped{Step: StepAdmission,
		Message: fmt.Sprintf("these list %s and no other served version of %s: once it is not served they no longer see %s\n  - %s",
			w.o.Version, w.plural, w.plural, strings.Join(what, "\n  - ")),
		Fix: fmt.Sprintf("add %s to their rules' apiVersions (they then receive %s objects), or use matchPolicy: Equivalent; crdserver does not edit them for you",
			w.storage, w.storage)}
}

func (w *walk) migrate(ctx context.Context) error {
	n := w.rep.Status.Objects
	if n == 0 {
		w.done(StepMigrate, "none in %s", w.o.Version)
		return nil
	}
	if w.o.DryRun {
		w.would(StepMigrate, "migrate %d objects from %s to %s (%s)", n, w.o.Version, w.storage, strings.Join(w.rep.Status.ObjectNames, ", "))
		return nil
	}
	w.done(StepMigrate, "migrating %d objects from %s to %s", n, w.o.Version, w.storage)
	if err := w.c.Migrate(ctx, w.group, w.plural, w.o.Out); err != nil {
		return err
	}
	if err := w.refresh(ctx, func(r *versionreport.VersionReport) bool { return r.Status.Objects == 0 }); err != nil {
		return err
	}
	if left := w.rep.Status.Objects; left > 0 {
		return &Stopped{Step: StepMigrate, Message: fmt.Sprintf("%d objects are still stored in %s after the migration: %s", left, w.o.Version, strings.Join(w.rep.Status.ObjectNames, ", ")),
			Fix: "run the retirement again (a write at " + w.o.Version + " may have raced the migration if it was the storage version)"}
	}
	w.migrated = true
	return nil
}

func (w *walk) rewriteManagedFields(ctx context.Context) error {
	mf := w.rep.Status.References.ManagedFields
	if len(mf) == 0 {
		w.done(StepManagedFields, "no entry at %s", w.o.Version)
		return nil
	}
	var parts []string
	for _, m := range mf {
		parts = append(parts, fmt.Sprintf("%s on %d objects", m.Manager, m.Objects))
	}
	if w.o.DryRun {
		w.would(StepManagedFields, "rewrite the entries at %s to %s: %s", w.gv(w.o.Version), w.gv(w.storage), strings.Join(parts, ", "))
		return nil
	}
	gvr := schema.GroupVersionResource{Group: w.group, Version: w.storage, Resource: w.plural}
	n, err := w.c.rewriteAll(ctx, gvr, StepManagedFields, managedFieldsFix(w.gv(w.o.Version), w.gv(w.storage)), w.o.Out)
	if err != nil {
		return err
	}
	w.done(StepManagedFields, "rewrote the entries at %s to %s on %d objects (%s)", w.gv(w.o.Version), w.gv(w.storage), n, strings.Join(parts, ", "))
	w.rewroteMF = true
	return nil
}

func (w *walk) rewriteOwnerReferences(ctx context.Context) error {
	refs := w.rep.Status.References.OwnerReferences
	if len(refs) == 0 {
		w.done(StepOwnerReferences, "none name %s", w.gv(w.o.Version))
		return nil
	}
	for _, r := range refs {
		if w.o.DryRun {
			w.would(StepOwnerReferences, "rewrite the ownerReferences to %s %s of %d %s to %s (%s)", w.gv(w.o.Version), w.kind, r.Objects, r.Resource, w.gv(w.storage), strings.Join(r.Names, ", "))
			continue
		}
		gvr, err := w.c.mapper.ResourceFor(schema.ParseGroupResource(r.Resource).WithVersion(""))
		if err != nil {
			return fmt.Errorf("the resource %s: %w", r.Resource, err)
		}
		n, err := w.c.rewriteAll(ctx, gvr, StepOwnerReferences, ownerReferencesFix(w.kind, w.gv(w.o.Version), w.gv(w.storage)), w.o.Out)
		if err != nil {
			return err
		}
		w.done(StepOwnerReferences, "rewrote the ownerReferences to %s %s of %d %s to %s", w.gv(w.o.Version), w.kind, n, r.Resource, w.gv(w.storage))
	}
	w.rewroteO = !w.o.DryRun
	return nil
}

// updateCRD changes the CRD (its status when status is set) as change
// says, guarded by its resourceVersion and read again on a conflict;
// change returns false when there is nothing to change.
func (w *walk) updateCRD(ctx context.Context, status bool, change func(*apiextensionsv1.CustomResourceDefinition) bool) (bool, error) {
	crds := w.c.crds.ApiextensionsV1().CustomResourceDefinitions()
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(ctx, w.o.CRD, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if changed = change(crd); !changed {
			return nil
		}
		if status {
			_, err = crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{FieldManager: "crdserver-retire"})
		} else {
			_, err = crds.Update(ctx, crd, metav1.UpdateOptions{FieldManager: "crdserver-retire"})
		}
		return err
	})
	return changed, err
}

func (w *walk) dropStoredVersion(ctx context.Context) error {
	if w.o.DryRun {
		if w.rep.Status.InStoredVersions {
			w.would(StepStoredVersions, "drop %s from status.storedVersions", w.o.Version)
		} else {
			w.done(StepStoredVersions, "%s is not listed", w.o.Version)
		}
		return nil
	}
	if w.migrated || w.rewroteMF || w.rewroteO {
		if err := w.refresh(ctx, func(r *versionreport.VersionReport) bool {
			return r.Status.Objects == 0 && len(r.Status.References.ManagedFields) == 0 && len(r.Status.References.OwnerReferences) == 0
		}); err != nil {
			return err
		}
	}
	if n := w.rep.Status.Objects; n > 0 {
		return &Stopped{Step: StepStoredVersions, Message: fmt.Sprintf("%d objects are stored in %s", n, w.o.Version), Fix: "run the retirement again"}
	}
	changed, err := w.updateCRD(ctx, true, func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		i := slices.Index(crd.Status.StoredVersions, w.o.Version)
		if i < 0 {
			return false
		}
		crd.Status.StoredVersions = slices.Delete(crd.Status.StoredVersions, i, i+1)
		if !slices.Contains(crd.Status.StoredVersions, w.storage) {
			crd.Status.StoredVersions = append(crd.Status.StoredVersions, w.storage)
		}
		return true
	})
	if err != nil {
		return err
	}
	switch {
	case changed:
		w.done(StepStoredVersions, "dropped %s from status.storedVersions", w.o.Version)
	case w.migrated:
		w.done(StepStoredVersions, "%s is not listed (the migration dropped it)", w.o.Version)
	default:
		w.done(StepStoredVersions, "%s is not listed", w.o.Version)
	}
	return nil
}

func (w *walk) stopServing(ctx context.Context) error {
	if w.o.DryRun {
		if w.rep.Status.Served {
			w.would(StepServed, "set served: false on %s", w.o.Version)
		} else {
			w.done(StepServed, "%s is not served", w.o.Version)
		}
		return nil
	}
	changed, err := w.updateCRD(ctx, false, func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		for i := range crd.Spec.Versions {
			if v := &crd.Spec.Versions[i]; v.Name == w.o.Version && v.Served {
				v.Served = false
				return true
			}
		}
		return false
	})
	return w.outcome(StepServed, changed, err, "set served: false on "+w.o.Version+": requests to it now get 404, and are still counted", w.o.Version+" is not served")
}

// outcome tells what a step that changes the CRD did.
func (w *walk) outcome(step string, changed bool, err error, did, already string) error {
	if err != nil {
		return err
	}
	if changed {
		w.done(step, "%s", did)
	} else {
		w.done(step, "%s", already)
	}
	return nil
}

func (w *walk) remove(ctx context.Context) error {
	if !w.o.Remove {
		w.say("%s of %s is retired: not served, nothing stored in it or referring to it. It stays in spec.versions; --remove deletes it once no request reached it for --grace.", w.o.Version, w.o.CRD)
		return nil
	}
	if cr := w.rep.Status.References.ConversionRules; cr != "" {
		return &Stopped{Step: StepRemove, Message: fmt.Sprintf("ConversionRules %s convert %s", cr, w.o.Version),
			Fix: "drop " + w.o.Version + "'s rules from the ConversionRules (and make another version the hub if it is), then run again"}
	}
	var last time.Time
	lastWho := ""
	// Every client counts here, those ignored too: the version goes only
	// once nothing called it for the grace period (as far back as the
	// server remembers: its window).
	for _, cl := range w.rep.Status.Clients {
		if cl.LastSeen.After(last) {
			last, lastWho = cl.LastSeen.Time, cl.User
		}
	}
	if wait := time.Until(last.Add(w.o.Grace)); !last.IsZero() && wait > 0 {
		return &Stopped{Step: StepRemove,
			Message: fmt.Sprintf("%s called %s at %s, within the grace period (%s)", lastWho, w.o.Version, last.UTC().Format(time.RFC3339), w.o.Grace),
			Fix:     fmt.Sprintf("run again after %s if no one calls it", last.Add(w.o.Grace).UTC().Format(time.RFC3339))}
	}
	if w.o.DryRun {
		w.would(StepRemove, "delete %s from spec.versions", w.o.Version)
		return nil
	}
	changed, err := w.updateCRD(ctx, false, func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == w.o.Version })
		if i < 0 {
			return false
		}
		crd.Spec.Versions = slices.Delete(crd.Spec.Versions, i, i+1)
		return true
	})
	if apierrors.IsInvalid(err) {
		return &Stopped{Step: StepRemove, Message: err.Error(), Fix: "fix what the server says, then run again"}
	}
	return w.outcome(StepRemove, changed, err, "deleted "+w.o.Version+" from spec.versions", w.o.Version+" is not in spec.versions")
}
