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
	"io"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	genericinitializer "k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/auth/nodeidentifier"
	"k8s.io/kubernetes/plugin/pkg/admission/noderestriction"
	"k8s.io/kubernetes/plugin/pkg/admission/serviceaccount"

	"github.com/nodelet/nodelet/controlplane/apivalidation"
)

// DefaultPlugins are the plugins on by default, in kube-apiserver's
// order (its RecommendedPluginOrder) among those served here. The
// namespace lifecycle and Priority steps are still the API server's own
// (apiserver/admission.go, priority.go) and run first.
var DefaultPlugins = []string{serviceaccount.PluginName, noderestriction.PluginName}

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
	// Plugins names the plugins in order; nil means DefaultPlugins.
	Plugins []string
}

// Chain is the admission chain: one call runs every mutating (Admit) or
// validating (Validate) plugin in order.
type Chain struct {
	handler admission.Interface
	v       *apivalidation.Validator
	objects admission.ObjectInterfaces
	// reach says, per configured plugin, which requests it may act on;
	// nil: all of them (see reaches).
	reach []func(admission.Attributes) bool
}

// nodes tells nodes' requests apart, as NodeRestriction does.
var nodes = nodeidentifier.NewDefaultNodeIdentifier()

// reaches are the requests the plugins named here act on at all, as each
// checks first itself: knowing it, the chain converts no object for a
// request no plugin reads (a ConfigMap written by a user, the common
// case). A plugin not named here reaches every request.
var reaches = map[string]func(admission.Attributes) bool{
	// Pods and their ephemeral containers.
	serviceaccount.PluginName: func(a admission.Attributes) bool {
		return a.GetResource().GroupResource() == schema.GroupResource{Resource: "pods"}
	},
	// Requests of nodes only.
	noderestriction.PluginName: func(a admission.Attributes) bool {
		_, isNode := nodes.NodeIdentity(a.GetUserInfo())
		return isNode
	},
}

// reached reports whether some configured plugin may act on a.
func (c *Chain) reached(a admission.Attributes) bool {
	for _, r := range c.reach {
		if r == nil || r(a) {
			return true
		}
	}
	return false
}

// New builds the plugins of cfg.Plugins and checks that each got what it
// needs (upstream's ValidateInitialization).
func New(cfg Config) (*Chain, error) {
	if cfg.Validator == nil || cfg.Client == nil || cfg.Informers == nil {
		return nil, fmt.Errorf("admission chain: validator, client and informers are required")
	}
	names := cfg.Plugins
	if names == nil {
		names = DefaultPlugins
	}
	plugins := admission.NewPlugins()
	serviceaccount.Register(plugins)
	noderestriction.Register(plugins)
	features := cfg.Features
	if features == nil {
		features = utilfeature.DefaultFeatureGate
	}
	init := genericinitializer.New(cfg.Client, nil, cfg.Informers, cfg.Authorizer, features, nil, nil, nil)
	handler, err := plugins.NewFromPlugins(names, noConfig{}, init, nil)
	if err != nil {
		return nil, fmt.Errorf("admission chain: %w", err)
	}
	reach := make([]func(admission.Attributes) bool, len(names))
	for i, n := range names {
		reach[i] = reaches[n]
	}
	return &Chain{handler: handler, v: cfg.Validator, objects: admission.NewObjectInterfacesFromScheme(cfg.Validator.Scheme()),
		reach: reach}, nil
}

// noConfig: no plugin here reads a configuration file (upstream's
// --admission-control-config-file).
type noConfig struct{}

func (noConfig) ConfigFor(string) (io.Reader, error) { return nil, nil }

// Admit runs the mutating plugins. a's object (and old object) are the
// API server's v1 objects; the object is changed in place.
func (c *Chain) Admit(ctx context.Context, a admission.Attributes) error {
	mut, ok := c.handler.(admission.MutationInterface)
	if !ok || !mut.Handles(a.GetOperation()) || !c.reached(a) {
		return nil
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

// Validate runs the validating plugins; they change nothing.
func (c *Chain) Validate(ctx context.Context, a admission.Attributes) error {
	val, ok := c.handler.(admission.ValidationInterface)
	if !ok || !val.Handles(a.GetOperation()) || !c.reached(a) {
		return nil
	}
	in, err := c.internal(a)
	if err != nil {
		return err
	}
	return val.Validate(ctx, in, c.objects)
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
	if _, _, err := c.v.Scheme().ObjectKinds(o); err != nil {
		return o, nil
	}
	in, err := c.v.Internal(o)
	if err != nil {
		return nil, fmt.Errorf("admission of %s %s: %w", a.GetKind().Kind, a.GetName(), err)
	}
	return in, nil
}
