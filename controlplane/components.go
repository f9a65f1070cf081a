package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/controlplane/authorization"
	"github.com/nodelet/nodelet/controlplane/controllers/endpoints"
	"github.com/nodelet/nodelet/controlplane/controllers/garbagecollector"
	"github.com/nodelet/nodelet/controlplane/controllers/localpath"
	"github.com/nodelet/nodelet/controlplane/controllers/namespace"
	"github.com/nodelet/nodelet/controlplane/controllers/nodeipam"
	"github.com/nodelet/nodelet/controlplane/controllers/nodelifecycle"
	"github.com/nodelet/nodelet/controlplane/controllers/podgc"
	"github.com/nodelet/nodelet/controlplane/controllers/servingcsr"
	"github.com/nodelet/nodelet/controlplane/controllers/upstream"
	"github.com/nodelet/nodelet/controlplane/leader"
	"github.com/nodelet/nodelet/controlplane/pki"
	"github.com/nodelet/nodelet/controlplane/satoken"
	"github.com/nodelet/nodelet/controlplane/scheduler"
)

// clientConfig is a loopback client config for a control-plane component,
// authenticated by a client certificate signed for user in groups.
func (c *ControlPlane) clientConfig(bundle *pki.Bundle, user string, groups []string, qps float32, burst int) (*rest.Config, error) {
	certPEM, keyPEM, err := bundle.SignClientCert(user, groups, 365*24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("client certificate for %s: %w", user, err)
	}
	return &rest.Config{
		Host: c.LocalURL(), QPS: qps, Burst: burst, UserAgent: user,
		TLSClientConfig: rest.TLSClientConfig{CAData: bundle.CAPEM(), CertData: certPEM, KeyData: keyPEM},
	}, nil
}

// runComponents runs the controllers and the scheduler while this process
// holds the leader lease. The API server must already be serving.
// schedMetrics outlives each term as leader, so the series carry on.
func (c *ControlPlane) runComponents(ctx context.Context, bundle *pki.Bundle, schedMetrics *scheduler.Metrics,
	legacyTokens satoken.Generator) error {
	// The controller manager's own identity lists and watches for the
	// shared informers and holds the Lease; each controller writes as its
	// own ServiceAccount (serviceAccountConfig), as upstream's
	// kube-controller-manager with --use-service-account-credentials.
	ctrlCfg, err := c.clientConfig(bundle, authorization.ControllerManagerUser, nil, 200, 400)
	if err != nil {
		return err
	}
	// The scheduler binds thousands of pods a second on big clusters: no
	// client-side limit on loopback.
	schedCfg, err := c.clientConfig(bundle, authorization.SchedulerUser, nil, -1, 0)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(ctrlCfg)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	lease := leader.Config{Client: cs, Namespace: "kube-system", Name: authorization.LeaderLease,
		Identity: host + "_" + string(uuid.NewUUID()), Log: c.cfg.Log}
	accounts := func(name string) (*rest.Config, error) {
		return c.clientConfig(bundle, serviceaccount.MakeUsername(metav1.NamespaceSystem, name),
			serviceaccount.MakeGroupNames(metav1.NamespaceSystem), 200, 400)
	}
	if c.cfg.DisableLeaderElection {
		return c.lead(ctx, ctrlCfg, schedCfg, accounts, schedMetrics, legacyTokens)
	}
	return leader.Run(ctx, lease, func(ctx context.Context) error {
		return c.lead(ctx, ctrlCfg, schedCfg, accounts, schedMetrics, legacyTokens)
	})
}

// accountConfig returns the client config of a controller's ServiceAccount
// in kube-system (a client certificate naming the account and its groups,
// which RBAC matches as it matches the account's tokens).
type accountConfig func(name string) (*rest.Config, error)

// lead builds every controller and the scheduler, starts their informers
// and runs them until ctx ends or one fails.
func (c *ControlPlane) lead(ctx context.Context, ctrlCfg, schedCfg *rest.Config, accounts accountConfig, schedMetrics *scheduler.Metrics,
	legacyTokens satoken.Generator) error {
	cs, err := kubernetes.NewForConfig(ctrlCfg)
	if err != nil {
		return err
	}
	schedCS, err := kubernetes.NewForConfig(schedCfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	schedFactory := informers.NewSharedInformerFactory(schedCS, 0)
	ctrlEvents, ctrlRecorder := recorder(cs, "controller-manager")
	defer ctrlEvents.Shutdown()
	schedEvents, schedRecorder := recorder(schedCS, "default-scheduler")
	defer schedEvents.Shutdown()

	log := c.cfg.Log
	runs, err := buildControllers(ctx, c.cfg, accounts, factory, ctrlRecorder)
	if err != nil {
		return err
	}
	// Upstream's controllers for the workload kinds share the informers;
	// each records events through a broadcaster of its own.
	upstreamRuns, err := upstream.Build(ctx, upstream.Config{Accounts: accounts, Informers: factory,
		HPASyncPeriod: c.cfg.HPASyncPeriod, HPADownscaleStabilization: c.cfg.HPADownscaleStabilization,
		RootCA: ctrlCfg.CAData, Root: ctrlCfg, LegacyTokens: legacyTokens,
		Signing: upstream.Signing{CertFile: filepath.Join(c.cfg.DataDir, pki.CACertName),
			KeyFile: filepath.Join(c.cfg.DataDir, pki.CAKeyName), Duration: c.cfg.ClusterSigningDuration}})
	if err != nil {
		return fmt.Errorf("upstream controllers: %w", err)
	}
	for name, run := range upstreamRuns {
		runs[name] = func(ctx context.Context) error { run(ctx); return nil }
	}
	sched, err := scheduler.New(scheduler.Config{Client: schedCS, Informers: schedFactory, Recorder: schedRecorder,
		Metrics: schedMetrics, Log: log})
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	factory.Start(ctx.Done())
	schedFactory.Start(ctx.Done())
	defer factory.Shutdown()
	defer schedFactory.Shutdown()

	g, ctx := errgroup.WithContext(ctx)
	for name, run := range runs {
		g.Go(func() error {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				return fmt.Errorf("%s controller: %w", name, err)
			}
			return nil
		})
	}
	g.Go(func() error {
		if err := sched.Run(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("scheduler: %w", err)
		}
		return nil
	})
	c.log.Info("controllers and scheduler running")
	return g.Wait()
}

// buildControllers constructs every controller (registering their informer
// handlers) and returns their Run functions by name. Each writes as the
// ServiceAccount upstream's counterpart uses.
func buildControllers(ctx context.Context, cfg Config, accounts accountConfig, factory informers.SharedInformerFactory, rec record.EventRecorder) (map[string]func(context.Context) error, error) {
	log := cfg.Log
	runs := map[string]func(context.Context) error{}
	clients := func(account string) (kubernetes.Interface, metadata.Interface, error) {
		rc, err := accounts(account)
		if err != nil {
			return nil, nil, err
		}
		rc = rest.AddUserAgent(rc, account)
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, nil, fmt.Errorf("client for %s: %w", account, err)
		}
		meta, err := metadata.NewForConfig(rc)
		if err != nil {
			return nil, nil, fmt.Errorf("metadata client for %s: %w", account, err)
		}
		return cs, meta, nil
	}
	cs, meta, err := clients("generic-garbage-collector")
	if err != nil {
		return nil, err
	}
	gc, err := garbagecollector.New(garbagecollector.Config{Metadata: meta, Discovery: cs.Discovery(), Recorder: rec, Log: log})
	if err != nil {
		return nil, fmt.Errorf("garbage collector: %w", err)
	}
	runs["garbagecollector"] = func(ctx context.Context) error { return gc.Run(ctx, 20) }
	if cs, meta, err = clients("namespace-controller"); err != nil {
		return nil, err
	}
	ns, err := namespace.New(namespace.Config{Client: cs, Metadata: meta, Discovery: cs.Discovery(), Informers: factory, Log: log})
	if err != nil {
		return nil, fmt.Errorf("namespace controller: %w", err)
	}
	runs["namespace"] = func(ctx context.Context) error { return ns.Run(ctx, 10) }
	// Node lifecycle and IPAM are upstream's node-controller's work.
	if cs, _, err = clients("node-controller"); err != nil {
		return nil, err
	}
	nl, err := nodelifecycle.New(nodelifecycle.Config{Client: cs, Informers: factory, Recorder: rec, Log: log,
		GracePeriod: cfg.NodeMonitorGracePeriod})
	if err != nil {
		return nil, fmt.Errorf("node lifecycle controller: %w", err)
	}
	runs["nodelifecycle"] = func(ctx context.Context) error { return nl.Run(ctx, 1) }
	ipam, err := nodeipam.New(nodeipam.Config{Client: cs, Informers: factory, Recorder: rec, Log: log,
		ClusterCIDR: cfg.ClusterCIDR, NodeMaskSize: cfg.NodeCIDRMaskSize})
	if err != nil {
		return nil, fmt.Errorf("node ipam controller: %w", err)
	}
	runs["nodeipam"] = func(ctx context.Context) error { return ipam.Run(ctx, 1) }
	if cs, _, err = clients("pod-garbage-collector"); err != nil {
		return nil, err
	}
	pgc, err := podgc.New(podgc.Config{Client: cs, Informers: factory, Log: log,
		TerminatedPodThreshold: cfg.TerminatedPodGCThreshold})
	if err != nil {
		return nil, fmt.Errorf("pod garbage collector: %w", err)
	}
	runs["podgc"] = pgc.Run
	// Endpoints and EndpointSlices: the account is bound to both upstream
	// roles (authorization.DefaultPolicy).
	if cs, _, err = clients("endpoint-controller"); err != nil {
		return nil, err
	}
	ep, err := endpoints.New(endpoints.Config{Client: cs, Informers: factory, Recorder: rec, Log: log})
	if err != nil {
		return nil, fmt.Errorf("endpoints controller: %w", err)
	}
	runs["endpoints"] = func(ctx context.Context) error { return ep.Run(ctx, 5) }
	if cs, _, err = clients(authorization.LocalPathAccount); err != nil {
		return nil, err
	}
	lp, err := localpath.New(localpath.Config{Client: cs, Informers: factory, Recorder: rec, Log: log})
	if err != nil {
		return nil, fmt.Errorf("local-path provisioner: %w", err)
	}
	runs["local-path-provisioner"] = func(ctx context.Context) error { return lp.Run(ctx, 2) }
	if cs, _, err = clients(authorization.KubeletServingApproverAccount); err != nil {
		return nil, err
	}
	serving := servingcsr.New(ctx, servingcsr.Config{Client: cs, Informers: factory, Log: log})
	runs["kubelet-serving-approver"] = func(ctx context.Context) error { return serving.Run(ctx, 2) }
	return runs, nil
}

// recorder returns an event broadcaster writing to the API and a recorder
// for component.
func recorder(cs kubernetes.Interface, component string) (record.EventBroadcaster, record.EventRecorder) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	return b, b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
}
