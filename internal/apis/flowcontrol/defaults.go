package flowcontrol

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/utils/ptr"
)

// Kubernetes' defaults of flowcontrol.apiserver.k8s.io/v1
// (k8s.io/kubernetes/pkg/apis/flowcontrol/v1, which cannot be imported).
const (
	defaultMatchingPrecedence       int32 = 1000
	defaultHandSize                 int32 = 8
	defaultQueues                   int32 = 64
	defaultQueueLengthLimit         int32 = 50
	defaultNominalConcurrencyShares int32 = 30
)

// DefaultFlowSchema fills in what a client left out of a FlowSchema.
func DefaultFlowSchema(fs *flowcontrolv1.FlowSchema) {
	if fs.Spec.MatchingPrecedence == 0 {
		fs.Spec.MatchingPrecedence = defaultMatchingPrecedence
	}
}

// DefaultPriorityLevel fills in what a client left out of a
// PriorityLevelConfiguration.
func DefaultPriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration) {
	if l := pl.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares == nil {
			l.NominalConcurrencyShares = ptr.To(defaultNominalConcurrencyShares)
		}
		if l.LendablePercent == nil {
			l.LendablePercent = ptr.To[int32](0)
		}
		if q := l.LimitResponse.Queuing; q != nil {
			if q.HandSize == 0 {
				q.HandSize = defaultHandSize
			}
			if q.Queues == 0 {
				q.Queues = defaultQueues
			}
			if q.QueueLengthLimit == 0 {
				q.QueueLengthLimit = defaultQueueLengthLimit
			}
		}
	}
	if e := pl.Spec.Exempt; e != nil {
		if e.NominalConcurrencyShares == nil {
			e.NominalConcurrencyShares = ptr.To[int32](0)
		}
		if e.LendablePercent == nil {
			e.LendablePercent = ptr.To[int32](0)
		}
	}
}
