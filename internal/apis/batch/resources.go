package batch

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/apis/batch"
	_ "k8s.io/kubernetes/pkg/apis/batch/install" // batch's defaults and conversions in legacyscheme
	"k8s.io/kubernetes/pkg/registry/batch/cronjob"
	"k8s.io/kubernetes/pkg/registry/batch/job"

	"github.com/crdserver/crdserver/internal/apis/kuberegistry"
	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// The etcd keys of the batch resources (kube-apiserver's).
const (
	JobPrefix     = "/registry/jobs/"
	CronJobPrefix = "/registry/cronjobs/"
)

// AddToScheme registers the batch/v1 Go types (for protobuf and the
// built-in type converter).
var AddToScheme = batchv1.AddToScheme

// Resources are the batch/v1 resources, in kube-apiserver's discovery
// order, each served from the cache newCache makes for its key prefix.
func Resources(newCache func(prefix string) *store.Cache) []*resource.Resource {
	return []*resource.Resource{
		CronJobs(newCache(CronJobPrefix)),
		Jobs(newCache(JobPrefix)),
	}
}

// Jobs is the jobs resource, with the status subresource and kube's
// status.successful field selector; a delete that names no propagation
// policy orphans a Job's pods, with kube's warning.
func Jobs(cache *store.Cache) *resource.Resource {
	r := kuberegistry.Kind[batchv1.Job, batch.Job]{
		Group: batchv1.GroupName, Version: "v1", Plural: "jobs", Kind: "Job", Categories: []string{"all"}, Namespaced: true, Prefix: JobPrefix,
		Kube: job.Strategy, StatusKube: job.StatusStrategy, OrphanWarning: jobOrphanWarning,
		List: func(items []batch.Job) runtime.Object { return &batch.JobList{Items: items} },
	}.Resource(cache)
	r.Versions[0].FieldLabels = map[string]resource.FieldLabel{"status.successful": statusSucceeded}
	return r
}

// jobOrphanWarning is kube-apiserver's warning on a delete of Jobs that
// names no propagation policy: batch/v1 orphans their pods by default.
const jobOrphanWarning = "child pods are preserved by default when jobs are deleted; " +
	"set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning"

// statusSucceeded is a Job's status.successful field label: its
// status.succeeded, 0 when absent (job.JobToSelectableFields).
func statusSucceeded(raw []byte) string {
	v, _ := jsonraw.Scalar(raw, []string{"status", "succeeded"})
	if v == "" {
		return "0"
	}
	if n, err := strconv.Atoi(v); err == nil {
		return strconv.Itoa(n)
	}
	return v
}

// CronJobs is the cronjobs resource, with the status subresource; a new
// CronJob's name is at most 52 characters (its Jobs' names add 11).
func CronJobs(cache *store.Cache) *resource.Resource {
	r := kuberegistry.Kind[batchv1.CronJob, batch.CronJob]{
		Group: batchv1.GroupName, Version: "v1", Plural: "cronjobs", Kind: "CronJob", ShortNames: []string{"cj"}, Categories: []string{"all"}, Namespaced: true, Prefix: CronJobPrefix,
		Kube: cronjob.Strategy, StatusKube: cronjob.StatusStrategy,
		List: func(items []batch.CronJob) runtime.Object { return &batch.CronJobList{Items: items} },
	}.Resource(cache)
	r.ValidateName = validateCronJobName
	return r
}

// validateCronJobName is kube's check of a new CronJob's name: a DNS
// subdomain of at most 52 characters (ValidateCronJobCreate).
func validateCronJobName(name string, prefix bool) []string {
	msgs := apimachineryvalidation.NameIsDNSSubdomain(name, prefix)
	if !prefix && len(name) > 52 {
		msgs = append(msgs, "must be no more than 52 characters")
	}
	return msgs
}
