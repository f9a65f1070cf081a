package admissionplugins

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	genericinitializer "k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle"
	validatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	mutatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	validatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	apiquota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/kubernetes/pkg/auth/nodeidentifier"
	certapproval "k8s.io/kubernetes/plugin/pkg/admission/certificates/approval"
	certsigning "k8s.io/kubernetes/plugin/pkg/admission/certificates/signing"
	certsubjectrestriction "k8s.io/kubernetes/plugin/pkg/admission/certificates/subjectrestriction"
	"k8s.io/kubernetes/plugin/pkg/admission/defaulttolerationseconds"
	"k8s.io/kubernetes/plugin/pkg/admission/limitranger"
	"k8s.io/kubernetes/plugin/pkg/admission/noderestriction"
	"k8s.io/kubernetes/plugin/pkg/admission/nodetaint"
	"k8s.io/kubernetes/plugin/pkg/admission/priority"
	"k8s.io/kubernetes/plugin/pkg/admission/runtimeclass"
	"k8s.io/kubernetes/plugin/pkg/admission/security/podsecurity"
	"k8s.io/kubernetes/plugin/pkg/admission/serviceaccount"
	"k8s.io/kubernetes/plugin/pkg/admission/storage/persistentvolume/resize"
	"k8s.io/kubernetes/plugin/pkg/admission/storage/storageclass/setdefault"
	"k8s.io/kubernetes/plugin/pkg/admission/storage/storageobjectinuseprotection"
)

// DefaultPlugins are the plugins on by default, in kube-apiserver's
// order (its AllOrderedPlugins) among those served here.
var DefaultPlugins = []string{
	lifecycle.PluginName,
	limitranger.PluginName,
	serviceaccount.PluginName,
	noderestriction.PluginName,
	nodetaint.PluginName,
	podsecurity.PluginName,
	priority.PluginName,
	defaulttolerationseconds.PluginName,
	setdefault.PluginName,
	storageobjectinuseprotection.PluginName,
	resize.PluginName,
	runtimeclass.PluginName,
	certapproval.PluginName,
	certsigning.PluginName,
	certsubjectrestriction.PluginName,
	mutatingwebhook.PluginName,
	validatingpolicy.PluginName,
	validatingwebhook.PluginName,
	resourcequota.PluginName,
}

// register adds every plugin the chain knows to plugins.
func register(plugins *admission.Plugins) {
	lifecycle.Register(plugins)
	limitranger.Register(plugins)
	serviceaccount.Register(plugins)
	noderestriction.Register(plugins)
	nodetaint.Register(plugins)
	podsecurity.Register(plugins)
	priority.Register(plugins)
	defaulttolerationseconds.Register(plugins)
	setdefault.Register(plugins)
	storageobjectinuseprotection.Register(plugins)
	resize.Register(plugins)
	runtimeclass.Register(plugins)
	certapproval.Register(plugins)
	certsigning.Register(plugins)
	certsubjectrestriction.Register(plugins)
	mutatingwebhook.Register(plugins)
	validatingpolicy.Register(plugins)
	validatingwebhook.Register(plugins)
	resourcequota.Register(plugins)
}

// readsV1 are the plugins that read no object, or read v1 objects as
// well as internal ones: the chain gives them the API server's v1
// objects as they are, so they cost no conversion. NamespaceLifecycle
// reads only the request's attributes; ResourceQuota's evaluators take
// v1 pods, Services and claims, and count every other kind.
var readsV1 = map[string]bool{lifecycle.PluginName: true, resourcequota.PluginName: true}

// nodes tells nodes' requests apart, as NodeRestriction does.
var nodes = nodeidentifier.NewDefaultNodeIdentifier()

var (
	podsResource    = schema.GroupResource{Resource: "pods"}
	claimsResource  = schema.GroupResource{Resource: "persistentvolumeclaims"}
	volumesResource = schema.GroupResource{Resource: "persistentvolumes"}
	nodesResource   = schema.GroupResource{Resource: "nodes"}
	classesResource = schema.GroupResource{Group: "scheduling.k8s.io", Resource: "priorityclasses"}
)

// reaches are the requests the plugins named here act on at all, as each
// checks first itself: knowing it, the chain converts no object for a
// request no plugin reads (a ConfigMap written by a user, the common
// case). A converting plugin not named here reaches every request.
// reachesCSRs: the certificates plugins act on CertificateSigningRequests
// only.
func reachesCSRs(a admission.Attributes) bool {
	return a.GetResource().GroupResource() == schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}
}

var reaches = map[string]func(admission.Attributes) bool{
	// Pods (and their resize) and claims, not their other subresources
	// (a node's pods/status, the scheduler's pods/binding).
	limitranger.PluginName: func(a admission.Attributes) bool {
		gr, sub := a.GetResource().GroupResource(), a.GetSubresource()
		return (gr == podsResource && (sub == "" || sub == "resize")) || (gr == claimsResource && sub == "")
	},
	// Pods and their ephemeral containers.
	serviceaccount.PluginName: func(a admission.Attributes) bool {
		sub := a.GetSubresource()
		return a.GetResource().GroupResource() == podsResource && (sub == "" || sub == "ephemeralcontainers")
	},
	// Pods and priority classes, not their subresources (pod groups are
	// not served).
	priority.PluginName: func(a admission.Attributes) bool {
		gr := a.GetResource().GroupResource()
		return a.GetSubresource() == "" && (gr == podsResource || gr == classesResource)
	},
	defaulttolerationseconds.PluginName: func(a admission.Attributes) bool {
		return a.GetSubresource() == "" && a.GetResource().GroupResource() == podsResource
	},
	// Claim creates: a claim without a class gets the default one.
	setdefault.PluginName: func(a admission.Attributes) bool {
		return a.GetOperation() == admission.Create && a.GetSubresource() == "" && a.GetResource().GroupResource() == claimsResource
	},
	// Claim and volume creates get their protection finalizer.
	storageobjectinuseprotection.PluginName: func(a admission.Attributes) bool {
		gr := a.GetResource().GroupResource()
		return a.GetOperation() == admission.Create && a.GetSubresource() == "" && (gr == claimsResource || gr == volumesResource)
	},
	// Claim updates: a larger request needs a class that allows expansion.
	resize.PluginName: func(a admission.Attributes) bool {
		return a.GetOperation() == admission.Update && a.GetSubresource() == "" && a.GetResource().GroupResource() == claimsResource
	},
	// Pod creates only: the class's overhead and scheduling are the
	// pod's from its creation on.
	runtimeclass.PluginName: func(a admission.Attributes) bool {
		return a.GetOperation() == admission.Create && a.GetSubresource() == "" && a.GetResource().GroupResource() == podsResource
	},
	// CertificateSigningRequests: approvals need the approve verb on the
	// signer, certificates the sign verb, and no kube-apiserver-client
	// request may ask for system:masters.
	certapproval.PluginName:           reachesCSRs,
	certsigning.PluginName:            reachesCSRs,
	certsubjectrestriction.PluginName: reachesCSRs,
	// Pods (and the subresources that change their spec), namespaces
	// (their labels) and the kinds with a pod template, not their
	// subresources.
	podsecurity.PluginName: func(a admission.Attributes) bool {
		gr, sub := a.GetResource().GroupResource(), a.GetSubresource()
		if gr == podsResource {
			return !podSecurityIgnores[sub]
		}
		return podSecurityReaches[gr] && sub == ""
	},
	nodetaint.PluginName: func(a admission.Attributes) bool {
		return a.GetSubresource() == "" && a.GetResource().GroupResource() == nodesResource
	},
	// Requests of nodes only.
	noderestriction.PluginName: func(a admission.Attributes) bool {
		_, isNode := nodes.NodeIdentity(a.GetUserInfo())
		return isNode
	},
}

// podSecurityReaches are the resources PodSecurity checks: pods and
// namespaces, and those its pod spec extractor finds a template in.
var podSecurityReaches = map[schema.GroupResource]bool{
	podsResource:                              true,
	{Resource: "namespaces"}:                  true,
	{Resource: "podtemplates"}:                true,
	{Resource: "replicationcontrollers"}:      true,
	{Group: "apps", Resource: "replicasets"}:  true,
	{Group: "apps", Resource: "deployments"}:  true,
	{Group: "apps", Resource: "statefulsets"}: true,
	{Group: "apps", Resource: "daemonsets"}:   true,
	{Group: "batch", Resource: "jobs"}:        true,
	{Group: "batch", Resource: "cronjobs"}:    true,
}

// podSecurityIgnores are the pod subresources PodSecurity passes
// (pod-security-admission's ignoredPodSubresources); it checks any other,
// ephemeralcontainers and resize among them.
var podSecurityIgnores = map[string]bool{"exec": true, "attach": true, "binding": true, "eviction": true,
	"log": true, "portforward": true, "proxy": true, "status": true}

// setTolerationSeconds sets DefaultTolerationSeconds' two values. The
// plugin keeps them in package variables that only its flags write, so
// they are set through its own flags, as kube-apiserver sets them; they
// are the process's, one control plane per process.
func setTolerationSeconds(notReady, unreachable int64) error {
	fs := pflag.NewFlagSet("admission", pflag.ContinueOnError)
	defaulttolerationseconds.RegisterFlags(fs)
	for name, v := range map[string]int64{"default-not-ready-toleration-seconds": notReady,
		"default-unreachable-toleration-seconds": unreachable} {
		if v == 0 {
			v = 300
		}
		if err := fs.Set(name, strconv.FormatInt(v, 10)); err != nil {
			return fmt.Errorf("admission chain: %s: %w", name, err)
		}
	}
	return nil
}

// quotaInitializer gives ResourceQuota its configuration, as
// kube-apiserver's own plugin initializer does.
type quotaInitializer struct{ cfg apiquota.Configuration }

func (q quotaInitializer) Initialize(p admission.Interface) {
	if w, ok := p.(genericinitializer.WantsQuotaConfiguration); ok {
		w.SetQuotaConfiguration(q.cfg)
	}
}

// noConfig: no plugin here reads a configuration file (upstream's
// --admission-control-config-file).
type noConfig struct{}

func (noConfig) ConfigFor(string) (io.Reader, error) { return nil, nil }
