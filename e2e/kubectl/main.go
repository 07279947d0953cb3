// Command kubectl is kubectl v1.37.2 built from the k8s.io/kubectl module, so
// that the e2e tests drive crdserver with the real client instead of a
// binary checked into the repository. TestMain builds it with `go build`.
//
// It does what Kubernetes' cmd/kubectl does: build the root command and run it
// with component-base's CLI runner, which prints errors the kubectl way.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	// Register the client auth plugins (exec, OIDC) as kubectl does.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	// Set klog's verbosity before anything logs, from -v/--v in the arguments.
	_, _ = logs.GlogSetter(cmd.GetLogVerbosity(os.Args))
	root := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(root); err != nil {
		util.CheckErr(err)
	}
}
