// Package upstream runs kube-controller-manager's own controllers for the
// workload kinds (k8s.io/kubernetes/pkg/controller/...): Deployments,
// ReplicaSets, Jobs, CronJobs, DaemonSets, ReplicationControllers,
// StatefulSets, PodDisruptionBudgets, finished-Job TTLs,
// HorizontalPodAutoscalers (on the API server's own metrics.k8s.io),
// namespaces' default ServiceAccounts and the kube-root-ca.crt ConfigMaps,
// ResourceQuotas' usage, and the storage controllers: PersistentVolume
// binding, the pvc- and pv-protection finalizers and generic ephemeral
// volumes' claims (volumes.go).
// It only wires them as cmd/kube-controller-manager does: a client of its
// own per controller (named by its user agent), the shared informer
// factory, upstream's default worker counts. Each controller makes its own
// event broadcaster from its client and logs through klog, taking its
// logger from the context.
//
// Not run: the pod garbage collector (pkg/controller/podgc). It imports
// pkg/kubelet/eviction for one helper (PodIsEvicted), and that package
// brings in the kubelet's container manager, cAdvisor, upstream's
// scheduler and the DRA libraries: a dozen modules more in the control
// plane. controlplane/controllers/podgc does its work instead, with
// upstream's semantics.
//
// Only the control plane imports this package: k8s.io/kubernetes must stay
// out of the node agent's binary.
package upstream

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	rbacv1client "k8s.io/client-go/kubernetes/typed/rbac/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
	"k8s.io/kubernetes/pkg/controller/cronjob"
	"k8s.io/kubernetes/pkg/controller/daemon"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/disruption"
	"k8s.io/kubernetes/pkg/controller/job"
	"k8s.io/kubernetes/pkg/controller/podautoscaler"
	"k8s.io/kubernetes/pkg/controller/podautoscaler/metrics"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	"k8s.io/kubernetes/pkg/controller/replication"
	"k8s.io/kubernetes/pkg/controller/statefulset"
	"k8s.io/kubernetes/pkg/controller/ttlafterfinished"
	"k8s.io/kubernetes/pkg/serviceaccount"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	"k8s.io/metrics/pkg/client/custom_metrics"
	"k8s.io/metrics/pkg/client/external_metrics"
)

// Upstream's defaults (pkg/controller/<name>/config/v1alpha1/defaults.go).
const (
	deploymentWorkers   = 5 // ConcurrentDeploymentSyncs
	replicaSetWorkers   = 5 // ConcurrentRSSyncs
	jobWorkers          = 5 // ConcurrentJobSyncs
	cronJobWorkers      = 5 // ConcurrentCronJobSyncs
	daemonSetWorkers    = 2 // ConcurrentDaemonSetSyncs
	rcWorkers           = 5 // ConcurrentRCSyncs
	statefulSetWorkers  = 5 // ConcurrentStatefulSetSyncs
	disruptionWorkers   = 1 // ConcurrentDisruptionSyncs
	ttlWorkers          = 5 // ConcurrentTTLSyncs
	daemonBackoffFirst  = 1 * time.Second
	daemonBackoffLatest = 15 * time.Minute
	hpaWorkers          = 5 // ConcurrentHorizontalPodAutoscalerSyncs
	tokensWorkers       = 5 // ConcurrentSATokenSyncs
	// clusterRoleAggregationWorkers: kube-controller-manager runs it with 5.
	clusterRoleAggregationWorkers = 5

	// DefaultHPASyncPeriod and DefaultHPADownscaleStabilization are
	// kube-controller-manager's --horizontal-pod-autoscaler-sync-period and
	// --horizontal-pod-autoscaler-downscale-stabilization.
	DefaultHPASyncPeriod             = 15 * time.Second
	DefaultHPADownscaleStabilization = 5 * time.Minute
	hpaTolerance                     = 0.1
	hpaCPUInitializationPeriod       = 5 * time.Minute
	hpaInitialReadinessDelay         = 30 * time.Second
)

// Config is what the controllers share.
type Config struct {
	// Accounts returns the client config of the ServiceAccount a
	// controller writes as (kube-system/NAME, upstream's account for it:
	// NAME is also its user agent), as kube-controller-manager with
	// --use-service-account-credentials gives each controller its own.
	Accounts func(name string) (*rest.Config, error)
	// Informers is the control plane's shared informer factory; the caller
	// starts it after Build.
	Informers informers.SharedInformerFactory
	// HPASyncPeriod is how often each HorizontalPodAutoscaler is
	// reconciled; HPADownscaleStabilization how far back the autoscaler
	// looks for the highest recommendation before scaling down. Zero:
	// upstream's defaults.
	HPASyncPeriod             time.Duration
	HPADownscaleStabilization time.Duration
	// RootCA is the cluster CA (PEM) published as kube-root-ca.crt in
	// every namespace.
	RootCA []byte
	// Root is the controller manager's own client config (its identity,
	// not an account's), for the controllers upstream runs with it: the
	// tokens controller.
	Root *rest.Config
	// LegacyTokens signs the tokens controller's legacy tokens; nil turns
	// it off, as kube-controller-manager without a signing key.
	LegacyTokens serviceaccount.TokenGenerator
	// Signing is the CA the CSR signers issue with (none: the approver
	// and cleaner run, nothing is signed).
	Signing Signing
}

// controllerConfig is what one controller is built from: the shared
// Config and the client config of its own account.
type controllerConfig struct {
	Config
	rest *rest.Config
}

// builder constructs one controller and returns its Run.
type builder func(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error)

// builders names every controller by upstream's user agent for it.
func builders() map[string]builder {
	return map[string]builder{
		"deployment-controller":              buildDeployment,
		"replicaset-controller":              buildReplicaSet,
		"job-controller":                     buildJob,
		"cronjob-controller":                 buildCronJob,
		"daemon-set-controller":              buildDaemonSet,
		"replication-controller":             buildReplication,
		"statefulset-controller":             buildStatefulSet,
		"disruption-controller":              buildDisruption,
		"ttl-after-finished-controller":      buildTTLAfterFinished,
		"horizontal-pod-autoscaler":          buildHPA,
		"service-account-controller":         buildServiceAccounts,
		"root-ca-cert-publisher":             buildRootCAPublisher,
		"clusterrole-aggregation-controller": buildClusterRoleAggregation,
		"resourcequota-controller":           buildResourceQuota,
		"persistent-volume-binder":           buildPersistentVolumeBinder,
		"pvc-protection-controller":          buildPVCProtection,
		"pv-protection-controller":           buildPVProtection,
		"ephemeral-volume-controller":        buildEphemeralVolume,
		"attachdetach-controller":            buildAttachDetach,
		"expand-controller":                  buildExpand,
		"certificate-controller":             buildCertificates,
		"bootstrap-signer":                   buildBootstrapSigner,
		"token-cleaner":                      buildTokenCleaner,
		tokensController:                     buildTokens,
	}
}

// tokensController is the one controller upstream runs under the
// controller manager's own identity (its root client builder).
const tokensController = "tokens-controller"

// Build constructs every controller, registering their informer handlers
// on cfg.Informers, and returns their Run functions by name. ctx bounds
// what the constructors start (event broadcasters) and carries the logger.
func Build(ctx context.Context, cfg Config) (map[string]func(context.Context), error) {
	runs := map[string]func(context.Context){}
	for name, build := range builders() {
		rc, err := cfg.Accounts(name)
		if name == tokensController {
			if cfg.Root == nil || cfg.LegacyTokens == nil {
				continue // off, as kube-controller-manager without a signing key
			}
			rc, err = rest.CopyConfig(cfg.Root), nil
		}
		if err != nil {
			return nil, fmt.Errorf("client for %s: %w", name, err)
		}
		rc = rest.AddUserAgent(rc, name)
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("client for %s: %w", name, err)
		}
		cctx := klog.NewContext(ctx, klog.FromContext(ctx).WithName(name))
		run, err := build(cctx, cs, controllerConfig{Config: cfg, rest: rc})
		if err != nil {
			return nil, fmt.Errorf("build %s: %w", name, err)
		}
		runs[name] = func(ctx context.Context) { run(klog.NewContext(ctx, klog.FromContext(cctx))) }
	}
	return runs, nil
}

func buildDeployment(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	dc, err := deployment.NewDeploymentController(ctx, f.Apps().V1().Deployments(), f.Apps().V1().ReplicaSets(),
		f.Core().V1().Pods(), cs)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) { dc.Run(ctx, deploymentWorkers) }, nil
}

func buildReplicaSet(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	rsc := replicaset.NewReplicaSetController(ctx, f.Apps().V1().ReplicaSets(), f.Core().V1().Pods(), cs,
		replicaset.BurstReplicas)
	return func(ctx context.Context) { rsc.Run(ctx, replicaSetWorkers) }, nil
}

func buildJob(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	// Workloads and PodGroups are consulted only under the WorkloadWithJob
	// gate (alpha, off); scheduling.k8s.io/v1beta1 is not served.
	jc, err := job.NewController(ctx, cs, f.Core().V1().Pods(), f.Batch().V1().Jobs(), nil, nil)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) { jc.Run(ctx, jobWorkers) }, nil
}

func buildCronJob(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	cj, err := cronjob.NewControllerV2(ctx, f.Batch().V1().Jobs(), f.Batch().V1().CronJobs(), cs)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) { cj.Run(ctx, cronJobWorkers) }, nil
}

func buildDaemonSet(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	dsc, err := daemon.NewDaemonSetsController(ctx, f.Apps().V1().DaemonSets(), f.Apps().V1().ControllerRevisions(),
		f.Core().V1().Pods(), f.Core().V1().Nodes(), cs, flowcontrol.NewBackOff(daemonBackoffFirst, daemonBackoffLatest))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) { dsc.Run(ctx, daemonSetWorkers) }, nil
}

func buildReplication(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	rm := replication.NewReplicationManager(ctx, f.Core().V1().Pods(), f.Core().V1().ReplicationControllers(), cs,
		replication.BurstReplicas)
	return func(ctx context.Context) { rm.Run(ctx, rcWorkers) }, nil
}

func buildStatefulSet(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	ssc := statefulset.NewStatefulSetController(ctx, f.Core().V1().Pods(), f.Apps().V1().StatefulSets(),
		f.Core().V1().PersistentVolumeClaims(), f.Apps().V1().ControllerRevisions(), cs)
	return func(ctx context.Context) { ssc.Run(ctx, statefulSetWorkers) }, nil
}

// discoveryScales returns a RESTMapper over the API server's discovery and
// a scale client resolving scale kinds through discovery, as
// kube-controller-manager gives the disruption controller and the
// autoscaler. It resets its mapper every 30 s to pick up new CRDs; the
// resources served here are fixed for the process's life, so the cache is
// loaded once, on first use.
func discoveryScales(cs kubernetes.Interface, cfg controllerConfig, agent string) (*restmapper.DeferredDiscoveryRESTMapper, scale.ScalesGetter, error) {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
	scaleCfg := rest.AddUserAgent(rest.CopyConfig(cfg.rest), agent)
	scales, err := scale.NewForConfig(scaleCfg, mapper, dynamic.LegacyAPIPathResolverFunc,
		scale.NewDiscoveryScaleKindResolver(cs.Discovery()))
	if err != nil {
		return nil, nil, fmt.Errorf("scale client: %w", err)
	}
	return mapper, scales, nil
}

// buildDisruption gives the disruption controller what upstream's does:
// discovery-backed scales, for PodDisruptionBudgets over pods whose
// controller is not a built-in.
func buildDisruption(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	mapper, scales, err := discoveryScales(cs, cfg, "disruption-controller")
	if err != nil {
		return nil, err
	}
	dc := disruption.NewDisruptionController(ctx, f.Core().V1().Pods(), f.Policy().V1().PodDisruptionBudgets(),
		f.Core().V1().ReplicationControllers(), f.Apps().V1().ReplicaSets(), f.Apps().V1().Deployments(),
		f.Apps().V1().StatefulSets(), cs, mapper, scales, cs.Discovery())
	return func(ctx context.Context) { dc.Run(ctx, disruptionWorkers) }, nil
}

func buildTTLAfterFinished(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	tc := ttlafterfinished.New(ctx, cfg.Informers.Batch().V1().Jobs(), cs)
	return func(ctx context.Context) { tc.Run(ctx, ttlWorkers) }, nil
}

// buildHPA wires the autoscaler as kube-controller-manager does: scales
// through discovery, resource metrics from metrics.k8s.io (served by the
// API server itself, see controlplane/nodemetrics), and custom and
// external metrics from whatever serves custom.metrics.k8s.io and
// external.metrics.k8s.io (nothing here yet: such HPAs report that their
// metrics are unavailable, as upstream's do without an adapter).
func buildHPA(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	mapper, scales, err := discoveryScales(cs, cfg, "horizontal-pod-autoscaler")
	if err != nil {
		return nil, err
	}
	restCfg := rest.CopyConfig(cfg.rest)
	resources, err := resourceclient.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("resource metrics client: %w", err)
	}
	external, err := external_metrics.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("external metrics client: %w", err)
	}
	versions := custom_metrics.NewAvailableAPIsGetter(cs.Discovery())
	metricsClient := metrics.NewRESTMetricsClient(resources,
		custom_metrics.NewForConfig(restCfg, mapper, versions), external)
	period := orDefault(cfg.HPASyncPeriod, DefaultHPASyncPeriod)
	hc := podautoscaler.NewHorizontalController(ctx, cs.CoreV1(), scales, cs.AutoscalingV2(), mapper, metricsClient,
		f.Autoscaling().V2().HorizontalPodAutoscalers(), f.Core().V1().Pods(), period,
		orDefault(cfg.HPADownscaleStabilization, DefaultHPADownscaleStabilization), hpaTolerance,
		hpaCPUInitializationPeriod, hpaInitialReadinessDelay)
	return func(ctx context.Context) {
		go custom_metrics.PeriodicallyInvalidate(versions, period, ctx.Done())
		hc.Run(ctx, hpaWorkers)
	}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// buildClusterRoleAggregation fills the rules of ClusterRoles with an
// aggregationRule (admin, edit, view and users' own) from the roles their
// selectors match.
func buildClusterRoleAggregation(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	crac := clusterroleaggregation.NewClusterRoleAggregation(cfg.Informers.Rbac().V1().ClusterRoles(), applyAsUpdate{cs.RbacV1()})
	return func(ctx context.Context) { crac.Run(ctx, clusterRoleAggregationWorkers) }, nil
}

// applyAsUpdate gives the aggregation controller, which writes a role's
// rules with a forced server-side apply of rules alone, a read and an
// update of the rules instead: the API server serves no server-side apply
// yet. For this one field owned by one manager the two agree. It goes
// when server-side apply is served.
type applyAsUpdate struct {
	rbacv1client.ClusterRolesGetter
}

func (a applyAsUpdate) ClusterRoles() rbacv1client.ClusterRoleInterface {
	return clusterRolesApplyAsUpdate{a.ClusterRolesGetter.ClusterRoles()}
}

type clusterRolesApplyAsUpdate struct {
	rbacv1client.ClusterRoleInterface
}

func (c clusterRolesApplyAsUpdate) Apply(ctx context.Context, cfg *rbacv1ac.ClusterRoleApplyConfiguration, _ metav1.ApplyOptions) (*rbacv1.ClusterRole, error) {
	if cfg == nil || cfg.Name == nil {
		return nil, fmt.Errorf("apply of a cluster role without a name")
	}
	rules := make([]rbacv1.PolicyRule, 0, len(cfg.Rules))
	for _, r := range cfg.Rules {
		rules = append(rules, rbacv1.PolicyRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources,
			ResourceNames: r.ResourceNames, NonResourceURLs: r.NonResourceURLs})
	}
	var out *rbacv1.ClusterRole
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		role, err := c.Get(ctx, *cfg.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		role.Rules = rules
		out, err = c.Update(ctx, role, metav1.UpdateOptions{FieldManager: "clusterrole-aggregation-controller"})
		return err
	})
	return out, err
}
