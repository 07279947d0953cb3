package main

import "flag"

// priorityAndFairnessFlag registers --enable-priority-and-fairness, which
// is on by default as in kube-apiserver.
func priorityAndFairnessFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("enable-priority-and-fairness", true, "serve requests by API Priority and Fairness (FlowSchemas and PriorityLevelConfigurations sharing out --max-requests-inflight + --max-mutating-requests-inflight seats); false: the two in-flight limits by themselves")
}
