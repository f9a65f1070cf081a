// Package crds serves CustomResourceDefinitions: it runs upstream's CRD
// controllers (names, establishing, non-structural schema, API approval,
// instance cleanup on delete) and, for every CRD whose names are accepted,
// has the API server serve its versions (registry resources of
// unstructured objects, with upstream's schema semantics: see strategy.go)
// and their OpenAPI documents, kept current as CRDs come, change and go.
//
// It touches the API server only through Server: SetResources (owner: the
// CRD's name), the OpenAPI Set and ForgetTypes.
package crds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	listers "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/apiapproval"
	"k8s.io/apiextensions-apiserver/pkg/controller/establish"
	"k8s.io/apiextensions-apiserver/pkg/controller/finalizer"
	"k8s.io/apiextensions-apiserver/pkg/controller/nonstructuralschema"
	"k8s.io/apiextensions-apiserver/pkg/controller/status"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/controlplane/controllers/keyqueue"
	"github.com/nodelet/nodelet/controlplane/openapi"
	"github.com/nodelet/nodelet/controlplane/registry"
)

// Server is what of the API server this component uses.
type Server interface {
	SetResources(owner string, rs []*registry.Resource)
	OpenAPI() *openapi.Set
	ForgetTypes(gv schema.GroupVersion)
}

// Config wires the component.
type Config struct {
	// Client reaches the API server as itself (the loopback identity).
	Client *rest.Config
	Server Server
	// ServiceResolver reaches conversion webhooks named by a Service (the
	// admission webhooks' resolver); nil: upstream's default
	// (<name>.<namespace>.svc).
	ServiceResolver webhook.ServiceResolver
	// Readiness is marked once the CRDs present at start are served.
	Readiness *Readiness
	Log       *slog.Logger
}

// Component serves the CRDs. Build it with New, run it with Run.
type Component struct {
	server  Server
	log     *slog.Logger
	client  apiextensionsclient.Interface
	dynamic dynamic.Interface
	factory apiextensionsinformers.SharedInformerFactory
	lister  listers.CustomResourceDefinitionLister
	queue   workqueue.TypedRateLimitingInterface[string]
	// converters make each CRD's converter (None or Webhook).
	converters *conversion.CRConverterFactory

	naming        *status.NamingConditionController
	establishing  *establish.EstablishingController
	finalizer     *finalizer.CRDFinalizer
	nonStructural *nonstructuralschema.ConditionController
	approval      *apiapproval.KubernetesAPIApprovalPolicyConformantConditionController

	// ready: every CRD present at start is served.
	ready *Readiness

	mu sync.Mutex // serializes sync
	// served are the group-versions each CRD's documents were put under.
	served map[string][]schema.GroupVersion
	// servedAs is what each served CRD was served from: a change of
	// anything else (its conditions but Terminating) rebuilds nothing,
	// as upstream's handler keeps a CRD's storage until its UID, spec or
	// accepted names change.
	servedAs map[string]servedFrom
	// builtinDocs are the documents the server had before any CRD: a CRD
	// of a built-in group-version never replaces them (built-ins win, as
	// in the resource table).
	builtinDocs map[string]bool
}

// New builds the component; nothing runs until Run.
func New(cfg Config) (*Component, error) {
	if cfg.Client == nil || cfg.Server == nil {
		return nil, errors.New("crds: Client and Server are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Readiness == nil {
		cfg.Readiness = &Readiness{}
	}
	client, err := apiextensionsclient.NewForConfig(cfg.Client)
	if err != nil {
		return nil, fmt.Errorf("crds: apiextensions client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg.Client)
	if err != nil {
		return nil, fmt.Errorf("crds: dynamic client: %w", err)
	}
	if cfg.ServiceResolver == nil {
		cfg.ServiceResolver = webhook.NewDefaultServiceResolver()
	}
	converters, err := conversion.NewCRConverterFactory(cfg.ServiceResolver, nil)
	if err != nil {
		return nil, fmt.Errorf("crds: conversion: %w", err)
	}
	// Upstream's resync (apiextensions-apiserver's), which its
	// controllers' handlers ask for.
	factory := apiextensionsinformers.NewSharedInformerFactory(client, 5*time.Minute)
	crdInformer := factory.Apiextensions().V1().CustomResourceDefinitions()
	crdClient := client.ApiextensionsV1()
	c := &Component{
		server: cfg.Server, log: cfg.Log.With("component", "crds"),
		client: client, dynamic: dyn, factory: factory, lister: crdInformer.Lister(), converters: converters,
		ready: cfg.Readiness,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "crds"}),
		naming:        status.NewNamingConditionController(klog.Background(), crdInformer, crdClient),
		establishing:  establish.NewEstablishingController(crdInformer, crdClient),
		finalizer:     finalizer.NewCRDFinalizer(crdInformer, crdClient, instanceClients{dynamic: dyn}),
		nonStructural: nonstructuralschema.NewConditionController(crdInformer, crdClient),
		approval:      apiapproval.NewKubernetesAPIApprovalPolicyConformantConditionController(crdInformer, crdClient),
		served:        map[string][]schema.GroupVersion{},
		servedAs:      map[string]servedFrom{},
		builtinDocs:   map[string]bool{},
	}
	for _, p := range cfg.Server.OpenAPI().GroupVersions() {
		c.builtinDocs[p] = true
	}
	enqueue := func(obj interface{}) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := crdInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, DeleteFunc: enqueue,
		UpdateFunc: func(old, obj interface{}) {
			// A resync changes nothing: serving is rebuilt (CEL compiled,
			// documents and apply's types dropped) only on a change.
			o, ok1 := old.(*apiextensionsv1.CustomResourceDefinition)
			n, ok2 := obj.(*apiextensionsv1.CustomResourceDefinition)
			if ok1 && ok2 && o.ResourceVersion == n.ResourceVersion {
				return
			}
			enqueue(obj)
		},
	}); err != nil {
		return nil, fmt.Errorf("crds: watch CRDs: %w", err)
	}
	return c, nil
}

// Readiness says whether every CRD that existed when Run started is
// served (for /readyz, as kube-apiserver's crd-informer-synced check).
// It is made before the API server, whose readiness check asks it, and
// given to New; Run marks it.
type Readiness struct{ ready atomic.Bool }

// Check returns an error until the CRDs present at start are served.
func (r *Readiness) Check() error {
	if !r.ready.Load() {
		return errors.New("CustomResourceDefinitions not served yet")
	}
	return nil
}

// Run serves the CRDs and runs upstream's CRD controllers until ctx ends.
// It retries its informer until the API server answers.
func (c *Component) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	for typ, ok := range c.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("crds: sync the %v informer", typ)
		}
	}
	// Serve what exists before reporting ready, so that a restarted
	// control plane answers for its CRDs from its first ready moment.
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("crds: list CRDs: %w", err)
	}
	for _, crd := range all {
		if err := c.sync(ctx, crd.Name); err != nil {
			c.log.Error("serve CRD", "crd", crd.Name, "err", err)
		}
	}
	c.ready.ready.Store(true)
	c.log.Info("serving CustomResourceDefinitions", "count", len(all))

	var wg sync.WaitGroup
	run := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	run(func() { c.naming.RunWithContext(ctx) })
	run(func() { c.establishing.RunWithContext(ctx) })
	run(func() { c.finalizer.RunWithContext(1, ctx) })
	run(func() { c.nonStructural.RunWithContext(1, ctx) })
	run(func() { c.approval.RunWithContext(1, ctx) })
	run(func() { keyqueue.Run(ctx, c.queue, 1, c.sync, c.log) })
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

// sync serves the CRD name as it now is: its resources while its names
// are accepted (creates refused while it terminates), nothing once it is
// gone; and the OpenAPI documents of the group-versions it serves or
// served.
func (c *Component) sync(_ context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	crd, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		crd = nil
	} else if err != nil {
		return fmt.Errorf("get CRD %s: %w", name, err)
	}
	var rs []*registry.Resource
	if crd != nil && apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) {
		from := servedFromCRD(crd)
		if prev, ok := c.servedAs[name]; ok && prev.equal(from) {
			c.queueEstablishing(crd)
			return nil
		}
		c.servedAs[name] = from
		if rs, err = resources(crd, from.terminating, c.converters); err != nil {
			// Upstream's handler answers such a CRD's requests with an
			// error; here it is not served. Its status stays as is.
			c.log.Error("CRD not served", "crd", name, "err", err)
			rs = nil
		}
	}
	if rs == nil {
		delete(c.servedAs, name)
	}
	c.server.SetResources(name, rs)
	c.updateOpenAPI(name, crd, rs != nil)
	if rs != nil {
		c.queueEstablishing(crd)
	}
	return nil
}

// queueEstablishing hands a served CRD that is not Established yet to
// the establishing controller, at once as upstream's handler does when
// there is one API server.
func (c *Component) queueEstablishing(crd *apiextensionsv1.CustomResourceDefinition) {
	if !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		c.establishing.QueueCRD(crd.Name, 0)
	}
}

// servedFrom is what of a CRD its served resources are built from.
type servedFrom struct {
	uid         types.UID
	spec        *apiextensionsv1.CustomResourceDefinitionSpec
	names       apiextensionsv1.CustomResourceDefinitionNames
	terminating bool
}

func servedFromCRD(crd *apiextensionsv1.CustomResourceDefinition) servedFrom {
	return servedFrom{uid: crd.UID, spec: crd.Spec.DeepCopy(), names: *crd.Status.AcceptedNames.DeepCopy(),
		terminating: apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Terminating)}
}

func (s servedFrom) equal(o servedFrom) bool {
	return s.uid == o.uid && s.terminating == o.terminating &&
		apiequality.Semantic.DeepEqual(s.spec, o.spec) && apiequality.Semantic.DeepEqual(s.names, o.names)
}

// updateOpenAPI rebuilds the documents of the group-versions name serves
// now or served before, from every served CRD of each, and drops what
// server-side apply made from the old ones.
func (c *Component) updateOpenAPI(name string, crd *apiextensionsv1.CustomResourceDefinition, served bool) {
	set := c.server.OpenAPI()
	touched := map[schema.GroupVersion]bool{}
	for _, gv := range c.served[name] {
		touched[gv] = true
	}
	delete(c.served, name)
	set.DeleteV2(v2Part(name))
	if served {
		for _, v := range crd.Spec.Versions {
			if v.Served {
				gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
				touched[gv] = true
				c.served[name] = append(c.served[name], gv)
			}
		}
		set.UpdateV2(v2Part(name), v2Document(crd))
	}
	byGV := byGroupVersion(c.servedCRDs())
	for gv := range touched {
		if c.builtinDocs[gvPath(gv)] {
			continue
		}
		if crds := byGV[gv]; len(crds) > 0 {
			set.UpdateGroupVersion(gvPath(gv), v3Document(gv, crds))
		} else {
			set.DeleteGroupVersion(gvPath(gv))
		}
		c.server.ForgetTypes(gv)
	}
}

// servedCRDs are the CRDs served now (their latest state in the lister);
// c.mu held.
func (c *Component) servedCRDs() []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for name := range c.served {
		if crd, err := c.lister.Get(name); err == nil {
			out = append(out, crd)
		}
	}
	return out
}
