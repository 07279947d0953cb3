// Package batch is the built-in batch/v1 API: Jobs and CronJobs, stored
// as kube-apiserver stores them with no controllers running (as envtest
// does), with Kubernetes' own defaults, validation, strategies (a Job's
// generated selector and controller-uid labels among them) and tables
// (through kuberegistry).
package batch
