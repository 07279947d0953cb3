package admission

import (
	"context"
	"errors"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	validatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	applyv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// TypeCheckerName is the field manager of the status the type checker
// writes: the name of kube-controller-manager's controller.
const TypeCheckerName = "validatingadmissionpolicy-status"

// typeCheckWorkers is how many policies are checked at once
// (kube-controller-manager's default ConcurrentPolicySyncs).
const typeCheckWorkers = 5

// RunTypeChecker writes the status.typeChecking of every
// ValidatingAdmissionPolicy whose generation it has not checked, until ctx
// ends: what kube-controller-manager's ValidatingAdmissionPolicy status
// controller does, with the same TypeChecker (k8s.io/apiserver's
// validating policy plugin), Options.SchemaResolver and RESTMapper, and
// field manager (TypeCheckerName). Run it on one replica at a time (under
// leader election); it waits for Start.
func (a *Admission) RunTypeChecker(ctx context.Context) error {
	select {
	case <-a.started:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	checker := &validatingpolicy.TypeChecker{SchemaResolver: a.resolver, RestMapper: a.o.RESTMapper}
	policies := a.factory.Admissionregistration().V1().ValidatingAdmissionPolicies()
	client := a.o.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies()

	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: TypeCheckerName})
	defer q.ShutDown()
	enqueue := func(obj any) {
		if p, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
			q.Add(p.Name)
		}
	}
	reg, err := policies.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	if err != nil {
		return err
	}
	defer func() { _ = policies.Informer().RemoveEventHandler(reg) }()
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return context.Cause(ctx)
	}

	check := func(name string) error {
		policy, err := policies.Lister().Get(name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if policy.Generation <= policy.Status.ObservedGeneration {
			return nil
		}
		warnings := checker.Check(policy)
		found := make([]*applyv1.ExpressionWarningApplyConfiguration, 0, len(warnings))
		for _, w := range warnings {
			found = append(found, applyv1.ExpressionWarning().WithFieldRef(w.FieldRef).WithWarning(w.Warning))
		}
		status := applyv1.ValidatingAdmissionPolicy(policy.Name).WithStatus(
			applyv1.ValidatingAdmissionPolicyStatus().
				WithObservedGeneration(policy.Generation).
				WithTypeChecking(applyv1.TypeChecking().WithExpressionWarnings(found...)))
		_, err = client.ApplyStatus(ctx, status, metav1.ApplyOptions{FieldManager: TypeCheckerName, Force: true})
		return err
	}

	var wg sync.WaitGroup
	for range typeCheckWorkers {
		wg.Go(func() {
			for {
				name, quit := q.Get()
				if quit {
					return
				}
				err := check(name)
				switch {
				case err == nil:
					q.Forget(name)
				case ctx.Err() != nil:
				default:
					if !apierrors.IsConflict(err) && !errors.Is(err, context.Canceled) {
						a.log.Warn("type checking a ValidatingAdmissionPolicy", "policy", name, "err", err)
					}
					q.AddRateLimited(name)
				}
				q.Done(name)
			}
		})
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
	return nil
}
