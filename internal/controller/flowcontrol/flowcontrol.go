// Package flowcontrol keeps API Priority and Fairness' configuration
// objects in place, as kube-apiserver's APF bootstrap ensurer does: the
// mandatory FlowSchemas and PriorityLevelConfigurations of
// k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap are created when missing
// and their specs always restored; the suggested ones are created when
// missing and updated unless their apf.kubernetes.io/autoupdate-spec
// annotation says false (an object without it is updated while its
// generation is 1, that is while nobody changed it); objects that annotation
// marks auto-updated but that are no longer bootstrap objects are deleted.
// The objects' Dangling condition is the APF filter's (package filters).
package flowcontrol

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"

	fcapi "github.com/crdserver/crdserver/internal/apis/flowcontrol"
	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// FieldManager is the field manager of the ensurer's writes, Kubernetes'.
const FieldManager = "api-priority-and-fairness-config-producer-v1"

// Keys of the queue: "pl/<name>" and "fs/<name>" ensure one bootstrap
// object; the cleanup keys delete the unwanted ones of a kind.
const (
	plKey        = "pl/"
	fsKey        = "fs/"
	cleanupPLKey = "cleanup-pl"
	cleanupFSKey = "cleanup-fs"
)

// wanted is one bootstrap object: its defaulted copy, and whether it is
// mandatory.
type wanted[T any] struct {
	obj       *T
	mandatory bool
}

// Controller keeps the bootstrap configuration in place.
type Controller struct {
	flowSchemas, priorityLevels *resource.Resource
	client                      flowcontrolclient.FlowcontrolV1Interface
	log                         *slog.Logger
	queue                       controller.Queue
	pls                         map[string]wanted[flowcontrolv1.PriorityLevelConfiguration]
	fss                         map[string]wanted[flowcontrolv1.FlowSchema]
	// plOrder and fsOrder are the names in bootstrap order (mandatory
	// first), levels before schemas.
	plOrder, fsOrder []string
}

// New returns the controller; it reads the caches of flowSchemas and
// priorityLevels and writes through client.
func New(flowSchemas, priorityLevels *resource.Resource, client flowcontrolclient.FlowcontrolV1Interface, log *slog.Logger) *Controller {
	c := &Controller{flowSchemas: flowSchemas, priorityLevels: priorityLevels, client: client, log: log,
		queue: controller.NewQueue("apf-config-producer"),
		pls:   map[string]wanted[flowcontrolv1.PriorityLevelConfiguration]{},
		fss:   map[string]wanted[flowcontrolv1.FlowSchema]{}}
	addPL := func(list []*flowcontrolv1.PriorityLevelConfiguration, mandatory bool) {
		for _, pl := range list {
			pl = pl.DeepCopy()
			fcapi.DefaultPriorityLevel(pl)
			c.pls[pl.Name] = wanted[flowcontrolv1.PriorityLevelConfiguration]{pl, mandatory}
			c.plOrder = append(c.plOrder, pl.Name)
		}
	}
	addFS := func(list []*flowcontrolv1.FlowSchema, mandatory bool) {
		for _, fs := range list {
			fs = fs.DeepCopy()
			fcapi.DefaultFlowSchema(fs)
			c.fss[fs.Name] = wanted[flowcontrolv1.FlowSchema]{fs, mandatory}
			c.fsOrder = append(c.fsOrder, fs.Name)
		}
	}
	addPL(bootstrap.MandatoryPriorityLevelConfigurations, true)
	addPL(bootstrap.SuggestedPriorityLevelConfigurations, false)
	addFS(bootstrap.MandatoryFlowSchemas, true)
	addFS(bootstrap.SuggestedFlowSchemas, false)
	return c
}

// Name implements controller.Controller.
func (c *Controller) Name() string { return "apf-config-producer" }

// Run implements controller.Controller.
func (c *Controller) Run(ctx context.Context) {
	follow := func(cache *store.Cache, prefix, cleanup string, order []string) {
		go store.Follow(ctx, cache, func([]*store.Item, int64) {
			for _, n := range order {
				c.queue.Add(prefix + n)
			}
			c.queue.Add(cleanup)
		}, func(ev store.Event) {
			c.queue.Add(prefix + ev.Item.Name)
			if ev.Type != store.Deleted {
				c.queue.Add(cleanup)
			}
		})
	}
	follow(c.priorityLevels.Cache, plKey, cleanupPLKey, c.plOrder)
	follow(c.flowSchemas.Cache, fsKey, cleanupFSKey, c.fsOrder)
	controller.Work(ctx, c.Name(), c.queue, 1, c.log, c.sync)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	pls, fss := c.client.PriorityLevelConfigurations(), c.client.FlowSchemas()
	switch {
	case key == cleanupPLKey:
		return removeUnwanted(ctx, c.priorityLevels, c.pls, pls.Delete)
	case key == cleanupFSKey:
		return removeUnwanted(ctx, c.flowSchemas, c.fss, fss.Delete)
	case strings.HasPrefix(key, plKey):
		w, ok := c.pls[strings.TrimPrefix(key, plKey)]
		if !ok {
			return nil
		}
		return ensure(ctx, c.priorityLevels, w, pls.Create, pls.Update,
			func(p *flowcontrolv1.PriorityLevelConfiguration) any { return p.Spec },
			func(into, from *flowcontrolv1.PriorityLevelConfiguration) { into.Spec = *from.Spec.DeepCopy() })
	case strings.HasPrefix(key, fsKey):
		w, ok := c.fss[strings.TrimPrefix(key, fsKey)]
		if !ok {
			return nil
		}
		return ensure(ctx, c.flowSchemas, w, fss.Create, fss.Update,
			func(f *flowcontrolv1.FlowSchema) any { return f.Spec },
			func(into, from *flowcontrolv1.FlowSchema) { into.Spec = *from.Spec.DeepCopy() })
	}
	return nil
}

// object is what the ensurer needs of a configuration object.
type object[T any] interface {
	*T
	metav1.Object
}

// cached reads the object named name from res's cache (nil: none).
func cached[T any](res *resource.Resource, name string) (*T, error) {
	it, _ := res.Cache.Get(res.Key("", name))
	if it == nil {
		return nil, nil
	}
	t := new(T)
	if err := json.Unmarshal(it.Bytes(), t); err != nil {
		return nil, err
	}
	return t, nil
}

// ensure creates the bootstrap object w.obj if missing, or revises the
// current one as Kubernetes' ensurer does.
func ensure[T any, P object[T]](ctx context.Context, res *resource.Resource, w wanted[T],
	create func(context.Context, P, metav1.CreateOptions) (P, error),
	update func(context.Context, P, metav1.UpdateOptions) (P, error),
	spec func(P) any, setSpec func(into, from P)) error {
	want := P(w.obj)
	cur, err := cached[T](res, want.GetName())
	if err != nil {
		return err
	}
	if cur == nil {
		obj := P(new(T))
		*obj = *want
		obj.SetAnnotations(map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"})
		_, err := create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
		if apierrors.IsAlreadyExists(err) {
			return controller.Requeue()
		}
		return err
	}
	current := P(cur)
	autoUpdate := w.mandatory || shouldUpdateSpec(current)
	updateAnnotation := shouldUpdateAnnotation(current, autoUpdate)
	specChanged := autoUpdate && !apiequality.Semantic.DeepEqual(spec(want), spec(current))
	if !updateAnnotation && !specChanged {
		return nil
	}
	if specChanged {
		setSpec(current, want)
	}
	if updateAnnotation {
		ann := current.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[flowcontrolv1.AutoUpdateAnnotationKey] = strconv.FormatBool(autoUpdate)
		current.SetAnnotations(ann)
	}
	_, err = update(ctx, current, metav1.UpdateOptions{FieldManager: FieldManager})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// Changed or deleted meanwhile: the event brings the key back.
		return nil
	}
	return err
}

// shouldUpdateSpec says whether a suggested object's spec is kept as
// bootstrapped: as its annotation says, or, without one, while nobody
// changed it (generation 1).
func shouldUpdateSpec(o metav1.Object) bool {
	if v, err := strconv.ParseBool(o.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]); err == nil {
		return v
	}
	return o.GetGeneration() == 1
}

// shouldUpdateAnnotation says whether the annotation is to be set to
// desired.
func shouldUpdateAnnotation(o metav1.Object, desired bool) bool {
	if v, ok := o.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]; ok {
		if cur, err := strconv.ParseBool(v); err == nil && cur == desired {
			return false
		}
	}
	return true
}

// removeUnwanted deletes the objects of res annotated auto-updated that
// are not bootstrap objects.
func removeUnwanted[T any](ctx context.Context, res *resource.Resource, wantedNames map[string]wanted[T],
	del func(context.Context, string, metav1.DeleteOptions) error) error {
	for _, it := range res.Cache.List(store.ListOptions{}).Items {
		if _, ok := wantedNames[it.Name]; ok {
			continue
		}
		var meta struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(it.Bytes(), &meta); err != nil {
			continue
		}
		if v, err := strconv.ParseBool(meta.Metadata.Annotations[flowcontrolv1.AutoUpdateAnnotationKey]); err != nil || !v {
			continue
		}
		uid := meta.Metadata.UID
		err := del(ctx, it.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}
