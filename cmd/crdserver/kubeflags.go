package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/server/resourceconfig"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"
)

// kubeAdmissionPlugins are the admission plugins kube-apiserver knows, in
// its order (k8s.io/kubernetes pkg/kubeapiserver/options/plugins.go
// AllOrderedPlugins).
var kubeAdmissionPlugins = []string{
	"AlwaysAdmit", "NamespaceAutoProvision", "NamespaceLifecycle", "NamespaceExists",
	"LimitPodHardAntiAffinityTopology", "LimitRanger", "ServiceAccount", "NodeRestriction",
	"TaintNodesByCondition", "AlwaysPullImages", "ImagePolicyWebhook", "PodSecurity",
	"PodNodeSelector", "Priority", "DefaultTolerationSeconds", "PodTolerationRestriction",
	"EventRateLimit", "ExtendedResourceToleration", "DefaultStorageClass",
	"StorageObjectInUseProtection", "PodGroupProtection", "OwnerReferencesPermissionEnforcement",
	"PersistentVolumeClaimResize", "RuntimeClass", "CertificateApproval", "CertificateSigning",
	"ClusterTrustBundleAttest", "CertificateSubjectRestriction", "DefaultIngressClass",
	"DenyServiceExternalIPs", "PodTopologyLabels", "NodeDeclaredFeatureValidator", "PodResizeValidator",
	"MutatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy",
	"ValidatingAdmissionWebhook", "ResourceQuota", "AlwaysDeny",
}

// crdserverAdmissionPlugins are the admission plugins crdserver
// implements, all on by default as in kube-apiserver.
var crdserverAdmissionPlugins = []string{
	"NamespaceLifecycle", "MutatingAdmissionPolicy", "MutatingAdmissionWebhook",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook",
}

// kubeAPIServerFlags are kube-apiserver's command-line flags with their
// kube-apiserver meaning (those crdserver shares with envtest and
// kube-apiserver's usual command lines).
type kubeAPIServerFlags struct {
	certDir          *string
	allowPrivileged  *bool
	enableAdmission  listFlag
	disableAdmission listFlag
	serviceIPRange   *string
	nodePortRange    utilnet.PortRange
	runtimeConfig    cliflag.ConfigurationMap
	verbosity        *int
}

// addKubeAPIServerFlags registers them on fs; --secure-port is another
// name of --port.
func addKubeAPIServerFlags(fs *flag.FlagSet, port *int) *kubeAPIServerFlags {
	f := &kubeAPIServerFlags{runtimeConfig: cliflag.ConfigurationMap{}, nodePortRange: utilnet.PortRange{Base: 30000, Size: 2768}}
	fs.IntVar(port, "secure-port", *port, "kube-apiserver's name of --port")
	f.certDir = fs.String("cert-dir", "", "directory of the serving certificate: without --tls-cert-file, CERT_DIR/apiserver.crt and apiserver.key, made (self-signed) when missing, as kube-apiserver does; with --etcd-servers and no --data-dir, crdserver's own files (its CA, the admin kubeconfig) go to a temporary directory removed on exit")
	f.allowPrivileged = fs.Bool("allow-privileged", false, "allow privileged containers in Pods (checked by Pod validation; one setting per process)")
	fs.Var(&f.enableAdmission, "enable-admission-plugins", "admission plugins to turn on besides the default ones (comma-separated; crdserver implements "+strings.Join(crdserverAdmissionPlugins, ", ")+", all on by default)")
	fs.Var(&f.disableAdmission, "disable-admission-plugins", "admission plugins to turn off (comma-separated kube-apiserver plugin names; those crdserver does not implement have nothing to turn off)")
	f.serviceIPRange = fs.String("service-cluster-ip-range", "", "CIDR range (or two, one per IP family, comma-separated) Services' cluster IPs are allocated from")
	fs.Var(&f.nodePortRange, "service-node-port-range", "a port range to reserve for services with NodePort visibility, inclusive at both ends of the range (e.g. '30000-32767')")
	f.verbosity = fs.Int("v", 0, "number for the log level verbosity, as kube-apiserver's: 4 or more logs at debug level (unless --log-level says otherwise), and client-go's logs up to that level")
	fs.Var(&f.runtimeConfig, "runtime-config", "key=value pairs turning built-in APIs on or off: <group>/<version>=true|false, v1 or api/v1 for the core group, api/all, api/ga, api/beta, api/alpha=true|false")
	return f
}

// kubeSettings is what the flags say, checked.
type kubeSettings struct {
	// certFile and keyFile are the serving certificate from --cert-dir
	// (empty: none).
	certFile, keyFile string
	allowPrivileged   bool
	// disabledAdmission are the plugins crdserver implements that are off.
	disabledAdmission []string
	serviceIPRanges   []*net.IPNet
	nodePortRange     utilnet.PortRange
	runtimeConfig     map[string]string
	// verbosity is --v, klog's level.
	verbosity int
}

// settings checks the flags as kube-apiserver does, returning its errors.
// tlsGiven says whether --tls-cert-file or --tls-private-key-file is set.
func (f *kubeAPIServerFlags) settings(tlsGiven bool) (kubeSettings, error) {
	s := kubeSettings{allowPrivileged: *f.allowPrivileged, nodePortRange: f.nodePortRange, verbosity: *f.verbosity}
	var errs []error
	var err error
	if s.verbosity < 0 {
		errs = append(errs, fmt.Errorf("--v %d: want a level of 0 or more", s.verbosity))
	}
	if s.disabledAdmission, err = admissionPlugins(f.enableAdmission, f.disableAdmission); err != nil {
		errs = append(errs, err)
	}
	if s.serviceIPRanges, err = serviceClusterIPRanges(*f.serviceIPRange); err != nil {
		errs = append(errs, err)
	}
	if err := validateRuntimeConfig(f.runtimeConfig); err != nil {
		errs = append(errs, err)
	}
	if len(f.runtimeConfig) > 0 {
		s.runtimeConfig = map[string]string(f.runtimeConfig)
	}
	if *f.certDir != "" && !tlsGiven {
		s.certFile = filepath.Join(*f.certDir, "apiserver.crt")
		s.keyFile = filepath.Join(*f.certDir, "apiserver.key")
	}
	return s, errors.Join(errs...)
}

// admissionPlugins checks --enable-admission-plugins and
// --disable-admission-plugins with kube-apiserver's messages and returns
// the plugins crdserver implements that are turned off. Enabling a plugin
// kube-apiserver has and crdserver does not is refused.
func admissionPlugins(enable, disable []string) ([]string, error) {
	var errs []error
	known := sets.New(kubeAdmissionPlugins...)
	implemented := sets.New(crdserverAdmissionPlugins...)
	for _, name := range enable {
		switch {
		case !known.Has(name):
			errs = append(errs, fmt.Errorf("enable-admission-plugins plugin %q is unknown", name))
		case !implemented.Has(name):
			errs = append(errs, fmt.Errorf("enable-admission-plugins plugin %q is not implemented by crdserver (it implements %s)", name, strings.Join(crdserverAdmissionPlugins, ", ")))
		}
	}
	for _, name := range disable {
		if !known.Has(name) {
			errs = append(errs, fmt.Errorf("disable-admission-plugins plugin %q is unknown", name))
		}
	}
	if both := sets.List(sets.New(enable...).Intersection(sets.New(disable...))); len(both) > 0 {
		errs = append(errs, fmt.Errorf("%v in enable-admission-plugins and disable-admission-plugins overlapped", both))
	}
	var off []string
	for _, name := range crdserverAdmissionPlugins {
		if slices.Contains(disable, name) {
			off = append(off, name)
		}
	}
	return off, errors.Join(errs...)
}

// serviceClusterIPRanges parses --service-cluster-ip-range as
// kube-apiserver does: one CIDR, or two of different IP families; empty
// is kube-apiserver's default, 10.0.0.0/24.
func serviceClusterIPRanges(v string) ([]*net.IPNet, error) {
	if v == "" {
		v = "10.0.0.0/24"
	}
	list := strings.Split(v, ",")
	_, primary, err := netutils.ParseCIDRSloppy(list[0])
	if err != nil {
		return nil, errors.New("service-cluster-ip-range[0] is not a valid cidr")
	}
	if size := netutils.RangeSize(primary); size < 8 {
		return nil, errors.New("error determining service IP ranges for primary service cidr: the service cluster IP range must be at least 8 IP addresses")
	}
	out := []*net.IPNet{primary}
	if len(list) > 1 {
		_, secondary, err := netutils.ParseCIDRSloppy(list[1])
		if err != nil {
			return nil, errors.New("service-cluster-ip-range[1] is not an ip net")
		}
		out = append(out, secondary)
	}
	var errs []error
	if len(list) > 2 {
		errs = append(errs, errors.New("--service-cluster-ip-range must not contain more than two entries"))
	}
	if len(out) == 2 {
		dual, err := netutils.IsDualStackCIDRs(out)
		if err != nil {
			errs = append(errs, fmt.Errorf("error attempting to validate dualstack for --service-cluster-ip-range value error:%v", err))
		}
		if !dual {
			errs = append(errs, errors.New("--service-cluster-ip-range[0] and --service-cluster-ip-range[1] must be of different IP family"))
		}
	}
	return out, errors.Join(errs...)
}

// validateRuntimeConfig checks --runtime-config's syntax as
// kube-apiserver's API enablement options do; which group versions exist
// is the server's to check, against what it serves.
func validateRuntimeConfig(m cliflag.ConfigurationMap) error {
	if m[resourceconfig.APIAll] == "false" && len(m) == 1 {
		return fmt.Errorf("invalid runtime-config with only %v=false", resourceconfig.APIAll)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case resourceconfig.APIAll, resourceconfig.APIGA, resourceconfig.APIBeta, resourceconfig.APIAlpha:
			if v := m[k]; v != "true" && v != "false" {
				return fmt.Errorf("invalid value %v=%v", k, v)
			}
		case "v1":
		default:
			if _, err := resourceconfig.ParseGroupVersions(cliflag.ConfigurationMap{k: m[k]}); err != nil {
				return err
			}
		}
	}
	return nil
}

// ensureSelfSignedCert makes a self-signed serving certificate and key at
// certFile and keyFile unless both exist, as kube-apiserver does in its
// --cert-dir: for the host (the bind address, or localhost), the first
// IP of the Service range and the kubernetes Service's names. It says
// whether it made them.
func ensureSelfSignedCert(certFile, keyFile, bindAddress string, serviceIPRanges []*net.IPNet) (bool, error) {
	_, certErr := os.Stat(certFile)
	_, keyErr := os.Stat(keyFile)
	if certErr == nil && keyErr == nil {
		return false, nil
	}
	host := bindAddress
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	var ips []net.IP
	if len(serviceIPRanges) > 0 {
		if ip, err := netutils.GetIndexedIP(serviceIPRanges[0], 1); err == nil {
			ips = append(ips, ip)
		}
	}
	dns := []string{"kubernetes.default.svc", "kubernetes.default", "kubernetes", "localhost"}
	cert, key, err := certutil.GenerateSelfSignedCertKey(host, ips, dns)
	if err != nil {
		return false, fmt.Errorf("unable to generate self signed cert: %w", err)
	}
	if err := certutil.WriteCert(certFile, cert); err != nil {
		return false, err
	}
	return true, keyutil.WriteKey(keyFile, key)
}

// usage prints the flags as kube-apiserver's --help does: one
// "--name type" line each, then what it does.
func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage: crdserver [serve] [flags]\n       crdserver migrate|check-crd|check-conversion|conversion-webhook|versions ...\n\ncrdserver serves the Kubernetes API of CustomResourceDefinitions and custom resources;\nit accepts kube-apiserver's flags listed here, with their meaning.\n\nFlags:\n")
	fs.VisitAll(func(f *flag.Flag) {
		typ, text := flag.UnquoteUsage(f)
		line := "      --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" && f.DefValue != "map[]" {
			text += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n                %s\n", line, text)
	})
}

// setKlogVerbosity sets klog's level (client-go logs through klog).
func setKlogVerbosity(v int) error {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	return fs.Set("v", strconv.Itoa(v))
}

// parseError turns the flag package's error for an unknown flag into a
// clear one.
func parseError(err error) error {
	const prefix = "flag provided but not defined: "
	if name, ok := strings.CutPrefix(err.Error(), prefix); ok {
		return fmt.Errorf("unknown flag --%s: crdserver does not implement it (crdserver --help lists the kube-apiserver flags it accepts)", strings.TrimLeft(name, "-"))
	}
	return err
}
