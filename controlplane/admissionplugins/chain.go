// Package admissionplugins runs upstream's admission plugins
// (k8s.io/kubernetes/plugin/pkg/admission and k8s.io/apiserver's) on the
// control plane's requests, as kube-apiserver's admission chain does.
//
// The API server speaks k8s.io/apiserver's admission.Attributes with its
// own v1 objects; upstream's plugins expect internal types (api.Pod), so
// the chain converts the object (and the old one) to internal types
// through apivalidation's scheme, runs the plugins, and converts the
// mutated object back in place. Plugins are built the way kube-apiserver
// builds them: registered by name into an admission.Plugins, made by
// NewFromPlugins in the configured order, and given a loopback client and
// a shared informer factory by upstream's plugin initializer.
//
// Only the control plane imports this package.
package admissionplugins

import (
	"context"
	"fmt"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	genericinitializer "k8s.io/apiserver/pkg/admission/initializer"
	webhookinit "k8s.io/apiserver/pkg/admission/plugin/webhook/initializer"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"

	"github.com/nodelet/nodelet/buildinfo"
	"github.com/nodelet/nodelet/controlplane/apivalidation"
	"github.com/nodelet/nodelet/controlplane/quota"
)

// Config wires a Chain.
type Config struct {
	// Validator's scheme converts between the v1 and internal types.
	Validator *apivalidation.Validator
	// Client is a loopback client of the API server (kube-apiserver's
	// loopback identity, system:apiserver in system:masters).
	Client kubernetes.Interface
	// Informers is the factory the plugins register their informers in;
	// the caller starts it once the API server serves.
	Informers informers.SharedInformerFactory
	// Authorizer is the API server's, for plugins that ask it
	// (NodeRestriction, for a node's token audiences).
	Authorizer authorizer.Authorizer
	// Features are the feature gates plugins consult (upstream's defaults
	// when nil).
	Features featuregate.FeatureGate
	// Dynamic is a loopback dynamic client, for ValidatingAdmissionPolicy's
	// parameter objects; required.
	Dynamic dynamic.Interface
	// Stop ends the plugins' own workers (ResourceQuota's); required.
	Stop <-chan struct{}
	// Plugins names the plugins in order; nil means DefaultPlugins.
	Plugins []string
	// NotReadyTolerationSeconds and UnreachableTolerationSeconds are the
	// tolerationSeconds DefaultTolerationSeconds gives pods for the
	// not-ready and unreachable NoExecute taints (upstream's
	// --default-not-ready-toleration-seconds and
	// --default-unreachable-toleration-seconds); 0 means upstream's 300.
	NotReadyTolerationSeconds    int64
	UnreachableTolerationSeconds int64
}

// Chain is the admission chain: one call runs every mutating (Admit) or
// validating (Validate) plugin in order.
type Chain struct {
	// segments are the configured plugins in order, grouped into runs of
	// those that read v1 objects and those that read internal ones.
	segments []segment
	v        *apivalidation.Validator
	objects  admission.ObjectInterfaces
}

// segment is a run of consecutive plugins of the chain.
type segment struct {
	names   []string
	handler admission.Interface
	// convert: the plugins read internal types.
	convert bool
	// reach says, per plugin of a converting segment, which requests it
	// may act on; nil: all of them (see reaches).
	reach []func(admission.Attributes) bool
}

// plan groups names, in order, into runs of plugins that read v1
// objects and runs of those that read internal ones (handlers unset);
// reach gives each plugin's reach (nil: every request).
func plan(names []string, reach map[string]func(admission.Attributes) bool) []segment {
	var out []segment
	for len(names) > 0 {
		n := 1
		for n < len(names) && readsV1[names[n]] == readsV1[names[0]] {
			n++
		}
		s := segment{names: names[:n], convert: !readsV1[names[0]]}
		for _, name := range s.names {
			s.reach = append(s.reach, reach[name])
		}
		out = append(out, s)
		names = names[n:]
	}
	return out
}

// reached reports whether some plugin of the segment may act on a.
func (s segment) reached(a admission.Attributes) bool {
	if !s.convert {
		return true
	}
	for _, r := range s.reach {
		if r == nil || r(a) {
			return true
		}
	}
	return false
}

// New builds the plugins of cfg.Plugins and checks that each got what it
// needs (upstream's ValidateInitialization).
func New(cfg Config) (*Chain, error) {
	if cfg.Validator == nil || cfg.Client == nil || cfg.Dynamic == nil || cfg.Informers == nil || cfg.Stop == nil {
		return nil, fmt.Errorf("admission chain: validator, clients, informers and stop are required")
	}
	// Policies name their parameters' kinds: resolved through discovery,
	// read again when a kind is not known yet.
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cfg.Client.Discovery()))
	names := cfg.Plugins
	if names == nil {
		names = DefaultPlugins
	}
	if err := setTolerationSeconds(cfg.NotReadyTolerationSeconds, cfg.UnreachableTolerationSeconds); err != nil {
		return nil, err
	}
	quotas, err := quota.Configuration(nil, cfg.Informers)
	if err != nil {
		return nil, fmt.Errorf("admission chain: %w", err)
	}
	plugins := admission.NewPlugins()
	register(plugins)
	features := cfg.Features
	if features == nil {
		features = utilfeature.DefaultFeatureGate
	}
	// The version PodSecurity's "latest" policy is: the Kubernetes release
	// served here.
	version := compatibility.NewEffectiveVersionFromString(strings.TrimPrefix(buildinfo.Kubernetes, "v"), "", "")
	init := admission.PluginInitializers{
		genericinitializer.New(cfg.Client, cfg.Dynamic, cfg.Informers, cfg.Authorizer, features, version, cfg.Stop, mapper),
		quotaInitializer{cfg: quotas},
		// Webhooks authenticate as their configuration says, with no
		// kubeconfig of per-webhook credentials (upstream's
		// --admission-control-config-file), and reach Services by their
		// cluster IPs.
		webhookinit.NewPluginInitializer(nil, clusterIPResolver{services: cfg.Informers.Core().V1().Services().Lister()}),
	}
	reach := configuredReaches(cfg.Informers)
	for name, r := range reaches {
		reach[name] = r
	}
	c := &Chain{v: cfg.Validator, objects: admission.NewObjectInterfacesFromScheme(cfg.Validator.Scheme()), segments: plan(names, reach)}
	for i := range c.segments {
		s := &c.segments[i]
		if s.handler, err = plugins.NewFromPlugins(s.names, noConfig{}, init, nil); err != nil {
			return nil, fmt.Errorf("admission chain: %w", err)
		}
	}
	return c, nil
}

// Admit runs the mutating plugins. a's object (and old object) are the
// API server's v1 objects; the object is changed in place.
func (c *Chain) Admit(ctx context.Context, a admission.Attributes) error {
	for _, s := range c.segments {
		mut, ok := s.handler.(admission.MutationInterface)
		if !ok || !mut.Handles(a.GetOperation()) || !s.reached(a) {
			continue
		}
		if err := c.admit(ctx, s, mut, a); err != nil {
			return err
		}
	}
	return nil
}

func (c *Chain) admit(ctx context.Context, s segment, mut admission.MutationInterface, a admission.Attributes) error {
	if !s.convert {
		return mut.Admit(ctx, a, c.objects)
	}
	in, err := c.internal(a)
	if err != nil {
		return err
	}
	obj := a.GetObject()
	if obj == nil || in.GetObject() == obj { // no conversion: mutated in place
		return mut.Admit(ctx, in, c.objects)
	}
	before := in.GetObject().DeepCopyObject()
	if err := mut.Admit(ctx, in, c.objects); err != nil {
		return err
	}
	// Only a changed object is converted back: a round trip through the
	// internal types is not the identity (it drops the apiVersion and kind
	// of embedded templates, for one), and an update that changes nothing
	// must stay a no-op.
	if apiequality.Semantic.DeepEqual(before, in.GetObject()) {
		return nil
	}
	return c.external(in.GetObject(), obj)
}

// Validate runs the validating plugins; they change nothing (but
// ResourceQuota charges the quota as it admits).
func (c *Chain) Validate(ctx context.Context, a admission.Attributes) error {
	for _, s := range c.segments {
		val, ok := s.handler.(admission.ValidationInterface)
		if !ok || !val.Handles(a.GetOperation()) || !s.reached(a) {
			continue
		}
		in := a
		if s.convert {
			var err error
			if in, err = c.internal(a); err != nil {
				return err
			}
		}
		if err := val.Validate(ctx, in, c.objects); err != nil {
			return err
		}
	}
	return nil
}

// internal is a with its objects converted to internal types (copies:
// a's objects are untouched until external writes the result back).
// Kinds the scheme has no internal type for are passed as they are, as
// kube-apiserver passes custom resources.
func (c *Chain) internal(a admission.Attributes) (admission.Attributes, error) {
	obj, err := c.toInternal(a, a.GetObject())
	if err != nil {
		return nil, err
	}
	old, err := c.toInternal(a, a.GetOldObject())
	if err != nil {
		return nil, err
	}
	return admission.NewAttributesRecord(obj, old, a.GetKind(), a.GetNamespace(), a.GetName(), a.GetResource(),
		a.GetSubresource(), a.GetOperation(), a.GetOperationOptions(), a.IsDryRun(), a.GetUserInfo()), nil
}

// external writes the mutated internal object back into the v1 one,
// keeping its apiVersion and kind (conversion sets the internal ones).
func (c *Chain) external(in, out runtime.Object) error {
	tm, err := meta.TypeAccessor(out)
	if err != nil {
		return err
	}
	apiVersion, kind := tm.GetAPIVersion(), tm.GetKind()
	if err := c.v.External(in, out); err != nil {
		return err
	}
	tm.SetAPIVersion(apiVersion)
	tm.SetKind(kind)
	return nil
}

func (c *Chain) toInternal(a admission.Attributes, o runtime.Object) (runtime.Object, error) {
	if o == nil {
		return nil, nil
	}
	// A scheme takes an unstructured object's kind as declared, so custom
	// resources must be told apart before it is asked.
	if _, ok := o.(runtime.Unstructured); ok {
		return o, nil
	}
	if _, _, err := c.v.Scheme().ObjectKinds(o); err != nil {
		return o, nil
	}
	in, err := c.v.Internal(o)
	if err != nil {
		return nil, fmt.Errorf("admission of %s %s: %w", a.GetKind().Kind, a.GetName(), err)
	}
	return in, nil
}
