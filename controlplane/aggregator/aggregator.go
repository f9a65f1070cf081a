// Package aggregator keeps the aggregation layer's APIServices current:
// one local APIService per group-version the API server serves itself
// (as kube-apiserver's autoregister and CRD registration controllers
// keep them), their Available conditions (kube-aggregator's own local and
// remote availability controllers), and the API server's set of
// group-versions served by extension servers, each with the resource
// list its server gives for discovery.
package aggregator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	aggregatorinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions"
	apiservicelisters "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"
	localavailability "k8s.io/kube-aggregator/pkg/controllers/status/local"
	availabilitymetrics "k8s.io/kube-aggregator/pkg/controllers/status/metrics"
	remoteavailability "k8s.io/kube-aggregator/pkg/controllers/status/remote"

	"github.com/nodelet/nodelet/controlplane/apiserver"
	"github.com/nodelet/nodelet/controlplane/pki"
)

// Server is what the component needs of the API server.
type Server interface {
	LocalGroupVersions() ([]schema.GroupVersion, <-chan struct{})
	SetRemoteAPI(gv schema.GroupVersion, api *apiserver.RemoteAPI) error
}

// Config wires the component.
type Config struct {
	Server Server
	// Client reads and writes APIServices, Kube the authentication
	// ConfigMap.
	Client aggregatorclient.Interface
	Kube   kubernetes.Interface
	// ClientCA is the cluster CA, published for extension servers.
	ClientCA []byte
	// Informers holds the Service and EndpointSlice informers the
	// Resolver was built on; Run starts it.
	Informers  informers.SharedInformerFactory
	Resolver   *Resolver
	FrontProxy *pki.FrontProxy
	Log        *slog.Logger
}

// Aggregator is the component; New, then Run.
type Aggregator struct {
	cfg      Config
	log      *slog.Logger
	apis     aggregatorinformers.SharedInformerFactory
	lister   apiservicelisters.APIServiceLister
	queue    workqueue.TypedRateLimitingInterface[string]
	local    *localavailability.AvailableConditionController
	remote   *remoteavailability.AvailableConditionController
	register chan struct{} // poked when an APIService is deleted
}

// New builds the component and its informers' handlers.
func New(cfg Config) (*Aggregator, error) {
	if cfg.Server == nil || cfg.Client == nil || cfg.Kube == nil || cfg.Informers == nil || cfg.Resolver == nil || cfg.FrontProxy == nil {
		return nil, errors.New("aggregator: Server, Client, Kube, Informers, Resolver and FrontProxy are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	a := &Aggregator{
		cfg:      cfg,
		log:      cfg.Log.With("component", "aggregator"),
		apis:     aggregatorinformers.NewSharedInformerFactory(cfg.Client, 0),
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		register: make(chan struct{}, 1),
	}
	informer := a.apis.Apiregistration().V1().APIServices()
	a.lister = informer.Lister()
	// Resync every minute: each sync fetches the extension server's
	// resource list again, as upstream refreshes aggregated discovery.
	if _, err := informer.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.enqueue(obj) },
		UpdateFunc: func(_, obj any) { a.enqueue(obj) },
		DeleteFunc: func(obj any) {
			a.enqueue(obj)
			select {
			case a.register <- struct{}{}:
			default:
			}
		},
	}, time.Minute); err != nil {
		return nil, err
	}
	metrics := availabilitymetrics.New()
	var err error
	if a.local, err = localavailability.New(informer, cfg.Client.ApiregistrationV1(), metrics); err != nil {
		return nil, fmt.Errorf("local availability controller: %w", err)
	}
	certKey := func() ([]byte, []byte) { return cfg.FrontProxy.CertPEM, cfg.FrontProxy.KeyPEM }
	if a.remote, err = remoteavailability.New(informer, cfg.Informers.Core().V1().Services(), cfg.Informers.Discovery().V1().EndpointSlices(),
		cfg.Client.ApiregistrationV1(), nil, certKey, cfg.Resolver, metrics); err != nil {
		return nil, fmt.Errorf("remote availability controller: %w", err)
	}
	return a, nil
}

func (a *Aggregator) enqueue(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if svc, ok := obj.(*apiregistrationv1.APIService); ok {
		a.queue.Add(svc.Name)
	}
}

// Run starts the informers and controllers and serves until ctx ends.
func (a *Aggregator) Run(ctx context.Context) error {
	defer a.queue.ShutDown()
	a.cfg.Informers.Start(ctx.Done())
	a.apis.Start(ctx.Done())
	defer a.apis.Shutdown()
	a.cfg.Informers.WaitForCacheSync(ctx.Done())
	a.apis.WaitForCacheSync(ctx.Done())
	go a.local.Run(1, ctx.Done())
	go a.remote.Run(2, ctx.Done())
	go a.registerLocal(ctx)
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := ensureAuthConfig(ctx, a.cfg.Kube, authConfigData(a.cfg.ClientCA, a.cfg.FrontProxy)); err != nil && ctx.Err() == nil {
			a.log.Warn("publish the authentication configuration", "err", err)
		}
	}, time.Minute)
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for a.processNext(ctx) {
		}
	}, time.Second)
	<-ctx.Done()
	return nil
}

func (a *Aggregator) processNext(ctx context.Context) bool {
	name, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(name)
	if err := a.syncRemote(ctx, name); err != nil {
		a.log.Warn("sync APIService", "name", name, "err", err)
		a.queue.AddRateLimited(name)
		return true
	}
	a.queue.Forget(name)
	return true
}

// registerLocal keeps one local APIService per group-version served here,
// again whenever the served set changes, an APIService is deleted, or
// every minute.
func (a *Aggregator) registerLocal(ctx context.Context) {
	for {
		served, changed := a.cfg.Server.LocalGroupVersions()
		if err := a.applyLocal(ctx, served); err != nil && ctx.Err() == nil {
			a.log.Warn("register local APIServices", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-a.register:
		case <-time.After(time.Minute):
		}
	}
}

func (a *Aggregator) applyLocal(ctx context.Context, served []schema.GroupVersion) error {
	existing, err := a.lister.List(labels.Everything())
	if err != nil {
		return err
	}
	plan := planLocal(served, existing)
	apis := a.cfg.Client.ApiregistrationV1().APIServices()
	var errs []error
	for _, svc := range plan.create {
		if _, err := apis.Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("create APIService %s: %w", svc.Name, err))
		}
	}
	for _, svc := range plan.update {
		if _, err := apis.Update(ctx, svc, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("update APIService %s: %w", svc.Name, err))
		}
	}
	for _, name := range plan.remove {
		if err := apis.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete APIService %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// syncRemote tells the API server whether the APIService name is served
// by an extension server, and with which resources.
func (a *Aggregator) syncRemote(ctx context.Context, name string) error {
	gv := helper.APIServiceNameToGroupVersion(name)
	svc, err := a.lister.Get(name)
	if apierrors.IsNotFound(err) || (err == nil && svc.Spec.Service == nil) {
		return a.cfg.Server.SetRemoteAPI(gv, nil)
	}
	if err != nil {
		return err
	}
	api := remoteAPI(svc)
	if api.Available {
		resources, err := fetchResources(ctx, a.cfg.Resolver, &a.cfg.FrontProxy.Client, api)
		if err != nil {
			a.log.Info("extension server's resource list not read", "apiService", name, "err", err)
		}
		api.Resources = resources
	}
	return a.cfg.Server.SetRemoteAPI(gv, api)
}

// remoteAPI is what the API server needs of a non-local APIService.
func remoteAPI(svc *apiregistrationv1.APIService) *apiserver.RemoteAPI {
	port := int32(443)
	if svc.Spec.Service.Port != nil {
		port = *svc.Spec.Service.Port
	}
	return &apiserver.RemoteAPI{
		GroupVersion:          schema.GroupVersion{Group: svc.Spec.Group, Version: svc.Spec.Version},
		GroupPriorityMinimum:  svc.Spec.GroupPriorityMinimum,
		VersionPriority:       svc.Spec.VersionPriority,
		Namespace:             svc.Spec.Service.Namespace,
		Service:               svc.Spec.Service.Name,
		Port:                  port,
		CABundle:              svc.Spec.CABundle,
		InsecureSkipTLSVerify: svc.Spec.InsecureSkipTLSVerify,
		Available:             helper.IsAPIServiceConditionTrue(svc, apiregistrationv1.Available),
	}
}
