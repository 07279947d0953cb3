package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"

	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// StorageGVR names a resource in its storage version, where crdserver's own
// controllers reach its objects (served or not).
func StorageGVR(res *resource.Resource) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: res.Group, Version: res.StorageVersion, Resource: res.Plural}
}

// DeleteAll asks the API to delete every object of res in namespace ns (or
// everywhere), honouring their finalizers, and reports how many it saw
// left: 0 means the resource is empty there, confirmed by a consistent
// list.
func DeleteAll(ctx context.Context, client dynamic.Interface, res *resource.Resource, ns string) (int, error) {
	rc := client.Resource(StorageGVR(res))
	l := res.Cache.List(store.ListOptions{Namespace: ns})
	if len(l.Items) == 0 {
		// Confirm with a consistent read: the cache may lag.
		var lister dynamic.ResourceInterface = rc
		if res.Namespaced && ns != "" {
			lister = rc.Namespace(ns)
		}
		list, err := lister.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return 0, err
		}
		return len(list.Items), nil
	}
	namespaces := sets.New[string]()
	for _, it := range l.Items {
		namespaces.Insert(it.Namespace)
	}
	for n := range namespaces {
		var err error
		if res.Namespaced {
			err = rc.Namespace(n).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		} else {
			err = rc.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return len(l.Items), fmt.Errorf("delete %s: %w", res, err)
		}
	}
	return len(l.Items), nil
}
