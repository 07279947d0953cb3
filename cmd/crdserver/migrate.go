package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/crdserver/crdserver/internal/retire"
)

// runMigrate starts a storage-version migration of one resource on a
// running server, shows its progress and waits for its end.
func runMigrate(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("crdserver migrate", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: crdserver migrate [flags] <plural>.<group>\n\nRewrites every stored object of the resource in its current storage version,\nthen leaves only that version in the CRD's status.storedVersions.")
		fs.PrintDefaults()
	}
	kubeconfig := fs.String("kubeconfig", defaultKubeconfig(), "kubeconfig of the server")
	timeout := fs.Duration("timeout", time.Hour, "how long to wait for the migration")
	// Flags may come before or after the resource, as with kubectl.
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) != 1 || !strings.Contains(positional[0], ".") {
		fs.Usage()
		return errors.New("name the resource as <plural>.<group>")
	}
	target := positional[0]
	plural, group, _ := strings.Cut(target, ".")
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	client, err := retire.NewClient(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	return client.Migrate(ctx, group, plural, out)
}

func defaultKubeconfig() string {
	if k := os.Getenv("KUBECONFIG"); k != "" {
		return strings.Split(k, string(os.PathListSeparator))[0]
	}
	return filepath.Join("crdserver-data", "admin.kubeconfig")
}
