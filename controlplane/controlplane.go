// Package controlplane wires the control plane: certificates, storage and
// the API server (controllers and the scheduler join in later issues).
package controlplane

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/pkg/capabilities"

	"github.com/nodelet/nodelet/buildinfo"
	"github.com/nodelet/nodelet/controlplane/admissionplugins"
	"github.com/nodelet/nodelet/controlplane/apiserver"
	"github.com/nodelet/nodelet/controlplane/apivalidation"
	"github.com/nodelet/nodelet/controlplane/authorization"
	"github.com/nodelet/nodelet/controlplane/bootstraptoken"
	"github.com/nodelet/nodelet/controlplane/crds"
	"github.com/nodelet/nodelet/controlplane/flowcontrol"
	"github.com/nodelet/nodelet/controlplane/nodeclient"
	"github.com/nodelet/nodelet/controlplane/nodemetrics"
	"github.com/nodelet/nodelet/controlplane/pki"
	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/satoken"
	"github.com/nodelet/nodelet/controlplane/scheduler"
	"github.com/nodelet/nodelet/controlplane/storage"
	"github.com/nodelet/nodelet/sdnotify"
)

// Config is everything the control plane needs; cmd/controlplane fills it from flags.
type Config struct {
	DataDir     string
	BindAddress string
	SecurePort  int
	// TLSSANs are extra names and addresses for the serving certificate.
	TLSSANs []string
	// TokenAuthFile, if set, holds static bearer tokens (token,user,uid,"groups").
	TokenAuthFile string
	// AnonymousAuth makes requests without credentials system:anonymous
	// (refused by the authorizer, 403) instead of 401, as upstream's
	// --anonymous-auth.
	AnonymousAuth bool
	// MaxRequestsInflight, MaxMutatingRequestsInflight and RequestTimeout
	// are upstream's --max-requests-inflight (0: no limit),
	// --max-mutating-requests-inflight and --request-timeout (0: none).
	MaxRequestsInflight         int
	MaxMutatingRequestsInflight int
	RequestTimeout              time.Duration
	// EventTTL is upstream's --event-ttl (0: Events are kept forever).
	EventTTL time.Duration
	// Audit is upstream's --audit-* flags (audit.go).
	Audit AuditConfig
	// Etcd, when it names servers, keeps every object in etcd instead of
	// the bbolt file in DataDir (store.go).
	Etcd EtcdConfig
	// EncryptionProviderConfig is upstream's --encryption-provider-config:
	// the resources it names are encrypted at rest (encryption.go).
	EncryptionProviderConfig string
	// AllowPrivileged lets pods run privileged containers (upstream's
	// --allow-privileged, which kubeadm and k3s turn on); false refuses
	// them in validation as "disallowed by cluster policy".
	AllowPrivileged bool
	ServiceCIDR     string
	// ClusterDNSIP is the ClusterIP of the kube-system/kube-dns Service,
	// the address the nodelets serve the cluster DNS on (their
	// --cluster-dns). Empty: the service CIDR's tenth address (10.96.0.10).
	ClusterDNSIP string
	// AdvertiseAddress is where pods and nodes reach the API server (the
	// endpoints of default/kubernetes). Empty: the bind address, or the
	// host's first global address when binding to all addresses.
	AdvertiseAddress string
	// NotReadyTolerationSeconds and UnreachableTolerationSeconds are what
	// admission gives pods that do not tolerate the not-ready and
	// unreachable NoExecute taints (0: upstream's 300).
	NotReadyTolerationSeconds    int64
	UnreachableTolerationSeconds int64
	// ClusterCIDR is where node pod CIDRs come from; NodeCIDRMaskSize is their size.
	ClusterCIDR      string
	NodeCIDRMaskSize int
	// NodeMonitorGracePeriod is how long a node may go without renewing its
	// Lease before it is marked NotReady/Unknown and tainted.
	NodeMonitorGracePeriod time.Duration
	// TerminatedPodGCThreshold is how many terminated pods may exist before
	// the pod garbage collector deletes the oldest; 0 or less disables
	// that part (cmd/controlplane's default is upstream's, 12500).
	TerminatedPodGCThreshold int
	// HPASyncPeriod and HPADownscaleStabilization tune the autoscaler as
	// kube-controller-manager's flags of those names do (zero: upstream's
	// 15 s and 5 min).
	HPASyncPeriod             time.Duration
	HPADownscaleStabilization time.Duration
	// ClusterSigningDuration is the longest certificate the CSR signers
	// issue with the cluster CA (kube-controller-manager's
	// --cluster-signing-duration); zero: a year.
	ClusterSigningDuration time.Duration
	// DisableLeaderElection runs controllers and scheduler without taking
	// the lease (only for a single control plane).
	DisableLeaderElection bool
	// Notifier, when set, tells systemd when the API server is ready and
	// pings its watchdog while it answers (cmd/controlplane sets it;
	// control planes embedded in tests and the lab leave it nil).
	Notifier *sdnotify.Notifier
	Log      *slog.Logger
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	cfg Config
	log *slog.Logger
}

// New checks cfg.
func New(cfg Config) (*ControlPlane, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("data dir is required")
	}
	if cfg.SecurePort <= 0 || cfg.SecurePort > 65535 {
		return nil, fmt.Errorf("secure port %d out of range", cfg.SecurePort)
	}
	if net.ParseIP(cfg.BindAddress) == nil {
		return nil, fmt.Errorf("bind address %q is not an IP address", cfg.BindAddress)
	}
	if cfg.ServiceCIDR == "" {
		cfg.ServiceCIDR = "10.96.0.0/12"
	}
	if cfg.ClusterDNSIP == "" {
		ip, err := apiserver.ClusterDNSServiceIP(cfg.ServiceCIDR)
		if err != nil {
			return nil, fmt.Errorf("cluster DNS IP: %w", err)
		}
		cfg.ClusterDNSIP = ip.String()
	}
	if ip, err := netip.ParseAddr(cfg.ClusterDNSIP); err != nil {
		return nil, fmt.Errorf("cluster DNS IP %q: %w", cfg.ClusterDNSIP, err)
	} else if p, err := netip.ParsePrefix(cfg.ServiceCIDR); err != nil || !p.Contains(ip) {
		return nil, fmt.Errorf("cluster DNS IP %s is not in the service CIDR %s", cfg.ClusterDNSIP, cfg.ServiceCIDR)
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &ControlPlane{cfg: cfg, log: cfg.Log.With("component", "controlplane")}, nil
}

// LocalURL is the URL local clients (the admin kubeconfig) use.
func (c *ControlPlane) LocalURL() string {
	host := c.cfg.BindAddress
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "https://" + net.JoinHostPort(host, strconv.Itoa(c.cfg.SecurePort))
}

// AuditConfig is where the audit log goes and what it records.
type AuditConfig struct {
	PolicyFile string
	// LogPath is the log file, "-" for standard output.
	LogPath string
	// MaxSizeMB, MaxBackups and MaxAgeDays rotate the file (0: 100 MB,
	// all backups, forever).
	MaxSizeMB, MaxBackups, MaxAgeDays int
}

// Run starts everything and blocks until ctx ends or a component fails.
// Storage is closed on return, after the API server has stopped.
func (c *ControlPlane) Run(ctx context.Context) error {
	advertise := c.advertiseAddress()
	sans := append([]string{advertise}, c.cfg.TLSSANs...)
	if ip, err := apiserver.FirstServiceIP(c.cfg.ServiceCIDR); err == nil {
		sans = append(sans, ip.String())
	}
	bundle, err := pki.Ensure(pki.Config{Dir: c.cfg.DataDir, Hosts: sans, APIServerURL: c.LocalURL(), Log: c.cfg.Log})
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	reg, err := newRegistry()
	if err != nil {
		return err
	}
	db, err := c.openStore()
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	defer db.Close()
	sealed, err := c.encryptAtRest(ctx, db)
	if err != nil {
		return err
	}
	store, err := storage.NewInstrumented(sealed, reg)
	if err != nil {
		return err
	}
	// Before the API server writes anything (EnsureDefaults in Serve): the
	// count is then kept from the writes themselves.
	if err := store.CountObjects(ctx); err != nil {
		return err
	}
	reqMetrics, err := apiserver.NewRequestMetrics(reg, upstreamMetrics(legacyregistry.DefaultGatherer))
	if err != nil {
		return err
	}
	schedMetrics, err := scheduler.NewMetrics(reg)
	if err != nil {
		return err
	}
	// Upstream's pod validation reads the privileged policy from this
	// process-wide setting, as kube-apiserver sets it from its flag.
	capabilities.Setup(c.cfg.AllowPrivileged, 0)
	validator := apivalidation.New()
	resources := registry.AllWith(validator)
	// kube-apiserver's loopback identity (system:apiserver in
	// system:masters): the access-control informers, the bootstrap and the
	// legacy tokens' last-use labels, used once the server serves.
	loopback, err := c.clientConfig(bundle, "system:apiserver", []string{"system:masters"}, -1, 0)
	if err != nil {
		return err
	}
	loopbackCS, err := kubernetes.NewForConfig(loopback)
	if err != nil {
		return fmt.Errorf("loopback client: %w", err)
	}
	// DATA_DIR/sa.key, made on first start like kubeadm's: the API server
	// verifies and issues tokens with it, the tokens controller signs
	// legacy ones.
	saKey, err := satoken.LoadOrCreateKey(filepath.Join(c.cfg.DataDir, "sa.key"))
	if err != nil {
		return err
	}
	legacyTokens, err := satoken.LegacyGenerator(saKey)
	if err != nil {
		return err
	}
	tokens, err := c.serviceAccountTokens(saKey, loopbackCS, store, resources)
	if err != nil {
		return err
	}
	secrets, err := apiserver.NewObjectGetter(store, resources)
	if err != nil {
		return err
	}
	authn, err := apiserver.NewAuthenticator(apiserver.AuthnOptions{TokenFile: c.cfg.TokenAuthFile,
		ServiceAccountTokens: tokens, APIAudiences: tokens.Audiences(), Anonymous: c.cfg.AnonymousAuth,
		BootstrapTokens: bootstraptoken.Authenticator(secrets)})
	if err != nil {
		return err
	}
	nodes, err := nodeClient(bundle)
	if err != nil {
		return err
	}
	defer nodes.Close()
	metrics, err := c.nodeMetrics(bundle, nodes)
	if err != nil {
		return err
	}
	acc, err := c.accessControl(ctx, loopback, loopbackCS, validator)
	if err != nil {
		return err
	}
	agg, err := newAggregation(bundle, loopbackCS)
	if err != nil {
		return err
	}
	auditor, auditLog, err := c.auditor()
	if err != nil {
		return err
	}
	if auditLog != nil {
		defer auditLog.Close()
	}
	// The CRDs are served by a component of their own, made once the
	// server exists; /readyz waits for it too.
	crdsReady := &crds.Readiness{}
	srv, err := apiserver.New(apiserver.Config{
		MaxRequestsInflight:         c.cfg.MaxRequestsInflight,
		MaxMutatingRequestsInflight: c.cfg.MaxMutatingRequestsInflight,
		RequestTimeout:              c.cfg.RequestTimeout,
		EventTTL:                    c.cfg.EventTTL,
		Audit:                       auditor,
		FrontProxy:                  &agg.frontProxy.Client,
		Endpoints:                   agg.resolver,
		Store:                       store,
		Resources:                   resources,
		Tokens:                      tokens,
		Admission:                   []apiserver.Admission{acc.authz.Escalation(), acc.chain},
		Validator:                   validator,
		Address:                     net.JoinHostPort(c.cfg.BindAddress, strconv.Itoa(c.cfg.SecurePort)),
		TLS:                         bundle.TLSConfig(),
		Authn:                       authn,
		Authz:                       acc.authz,
		Ready:                       func() error { return readyAll(acc.ready, crdsReady.Check) },
		ServiceCIDR:                 c.cfg.ServiceCIDR,
		AdvertiseAddress:            advertise,
		AdvertisePort:               c.cfg.SecurePort,
		ClusterDNSIP:                c.cfg.ClusterDNSIP,
		Version:                     buildinfo.Info(),
		Nodes:                       nodes,
		Metrics:                     metrics,
		RequestMetrics:              reqMetrics,
		Log:                         c.cfg.Log,
	})
	if err != nil {
		return fmt.Errorf("api server: %w", err)
	}
	crdServer, err := crds.New(crds.Config{Client: loopback, Server: srv, Log: c.cfg.Log,
		ServiceResolver: admissionplugins.ServiceResolver(acc.informers.Core().V1().Services().Lister()), Readiness: crdsReady})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(c.cfg.BindAddress, strconv.Itoa(c.cfg.SecurePort)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	c.log.Info("control plane starting", "url", c.LocalURL(), "dataDir", c.cfg.DataDir,
		"kubeconfig", bundle.AdminKubeconfigFile)
	g, ctx := errgroup.WithContext(ctx)
	// Serve does its start-up writes (system namespaces, the kubernetes
	// Service) before it accepts requests; components retry until then.
	g.Go(func() error { return srv.Serve(ctx, ln) })
	// The authorizer's and the plugins' informers list and watch through
	// the loopback client, and the bootstrap policy is written through it;
	// until the server answers, both retry.
	g.Go(func() error {
		acc.informers.Start(ctx.Done())
		acc.informers.WaitForCacheSync(ctx.Done())
		acc.synced.Store(true)
		<-ctx.Done()
		acc.informers.Shutdown()
		return nil
	})
	// Its informer retries until the server answers.
	g.Go(func() error { return crdServer.Run(ctx) })
	g.Go(func() error {
		if err := acc.boot.Run(ctx); err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	})
	// The serving certificate and admin kubeconfig are renewed while the
	// control plane runs, as at start.
	g.Go(func() error { return bundle.Run(ctx) })
	clusterInfo := bootstraptoken.NewClusterInfo(bootstraptoken.ClusterInfoConfig{Client: loopbackCS,
		Server: "https://" + net.JoinHostPort(advertise, strconv.Itoa(c.cfg.SecurePort)), CA: bundle.CAPEM(), Log: c.cfg.Log})
	g.Go(func() error {
		if err := clusterInfo.Run(ctx); err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	})
	apf, err := flowcontrol.New(flowcontrol.Config{Client: loopbackCS, Log: c.cfg.Log})
	if err != nil {
		return err
	}
	g.Go(func() error { return apf.Run(ctx) })
	g.Go(func() error {
		if err := agg.run(ctx, c, srv, bundle, loopback, loopbackCS); err != nil && ctx.Err() == nil {
			return fmt.Errorf("aggregator: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		// The components act under their own identities, which RBAC
		// knows once the bootstrap policy is in and its informers synced.
		if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
			return acc.ready() == nil, nil
		}); err != nil {
			return nil
		}
		err := c.runComponents(ctx, bundle, schedMetrics, legacyTokens)
		if ctx.Err() != nil {
			return nil
		}
		return err
	})
	if n := c.cfg.Notifier; n != nil {
		// READY=1 once /readyz answers; watchdog pings while /livez does;
		// STOPPING=1 as soon as the group's context ends.
		g.Go(func() error {
			n.Run(ctx, c.probe(bundle, "/readyz"), c.probe(bundle, "/livez"), time.Second)
			return nil
		})
	}
	return g.Wait()
}

// probe returns a check that GETs path from the API server the way a
// local client does (LocalURL, the serving certificate verified against
// the cluster CA) and wants 200: the listener, TLS and the handler all
// answer. The health paths are public, as upstream's (readable by
// system:unauthenticated), so no credentials are sent. Each check opens a
// new connection, so a server that stopped accepting fails it.
func (c *ControlPlane) probe(bundle *pki.Bundle, path string) func(context.Context) error {
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: bundle.CAPool(), MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}
	url := c.LocalURL() + path
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("GET %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("GET %s: %w", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	}
}

// nodeClient reaches nodelets as kube-apiserver-kubelet-client (bound to
// system:kubelet-api-admin, as kubeadm binds it), verifying them against
// the cluster CA.
func nodeClient(bundle *pki.Bundle) (*nodeclient.Client, error) {
	// No group: RBAC grants it system:kubelet-api-admin and nothing more,
	// so a Node object whose address points back at the API server
	// cannot turn nodes/proxy into a request as system:masters.
	certPEM, keyPEM, err := bundle.SignClientCert(nodeclient.APIServerUser, nil, pki.InProcess)
	if err != nil {
		return nil, fmt.Errorf("client certificate for nodelets: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("client certificate for nodelets: %w", err)
	}
	return nodeclient.New(nodeclient.Config{CAs: bundle.CAPool(), ClientCert: cert}), nil
}

// nodeMetrics serves metrics.k8s.io from the nodelets' /stats/summary.
// Its loopback client is only used once the API server serves.
func (c *ControlPlane) nodeMetrics(bundle *pki.Bundle, nodes *nodeclient.Client) (*nodemetrics.Source, error) {
	cfg, err := c.clientConfig(bundle, "system:kube-apiserver", []string{"system:masters"}, -1, 0)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metrics client: %w", err)
	}
	return nodemetrics.New(nodemetrics.Config{
		ListNodes: func(ctx context.Context) ([]corev1.Node, error) {
			l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return l.Items, nil
		},
		ListPods: func(ctx context.Context, ns string) ([]corev1.Pod, error) {
			l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return l.Items, nil
		},
		Fetch: nodes.Get,
		Log:   c.log,
	}), nil
}

// advertiseAddress picks the address in-cluster clients use.
func (c *ControlPlane) advertiseAddress() string {
	if c.cfg.AdvertiseAddress != "" {
		return c.cfg.AdvertiseAddress
	}
	if ip := net.ParseIP(c.cfg.BindAddress); ip != nil && !ip.IsUnspecified() {
		return ip.String()
	}
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return n.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// serviceAccountTokens is the ServiceAccount token issuer, signing with
// key and validating tokens against what store holds; legacy tokens' last
// use is recorded on their Secrets through the loopback client.
func (c *ControlPlane) serviceAccountTokens(key *rsa.PrivateKey, loopback kubernetes.Interface, store storage.Store,
	resources []*registry.Resource) (*satoken.Issuer, error) {
	getter, err := apiserver.NewObjectGetter(store, resources)
	if err != nil {
		return nil, err
	}
	return satoken.New(satoken.Config{Key: key, Getter: getter, Secrets: loopback.CoreV1()})
}

// accessControl is how the API server decides requests, all of it on
// informers of one loopback client under kube-apiserver's loopback
// identity (system:apiserver, group system:masters): RBAC with its
// escalation check and bootstrap policy, and upstream's admission plugins.
func (c *ControlPlane) accessControl(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, v *apivalidation.Validator) (*accessControl, error) {
	factory := informers.NewSharedInformerFactory(cs, 0)
	authz, err := authorization.New(factory)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("loopback dynamic client: %w", err)
	}
	chain, err := admissionplugins.New(admissionplugins.Config{Validator: v, Client: cs, Dynamic: dyn, Informers: factory, Authorizer: authz, Stop: ctx.Done(),
		NotReadyTolerationSeconds: c.cfg.NotReadyTolerationSeconds, UnreachableTolerationSeconds: c.cfg.UnreachableTolerationSeconds})
	if err != nil {
		return nil, err
	}
	return &accessControl{informers: factory, authz: authz, chain: chain,
		boot: authorization.NewBootstrapper(cs, authorization.DefaultPolicy(), c.cfg.Log)}, nil
}

type accessControl struct {
	informers informers.SharedInformerFactory
	// synced: every informer of the factory (the plugins' too) has listed.
	synced atomic.Bool
	authz  *authorization.Authorizer
	chain  *admissionplugins.Chain
	boot   *authorization.Bootstrapper
}

// ready is part of /readyz: the authorizers' and the admission plugins'
// informers have synced and the bootstrap policy is in place, as
// upstream's readyz waits for its informer-sync and rbac/bootstrap-roles
// checks.
func (a *accessControl) ready() error {
	if !a.synced.Load() {
		return errors.New("the admission and authorization informers have not synced")
	}
	return errors.Join(a.authz.Synced(), a.boot.Done())
}

// readyAll is ready when every check is (nil checks are not made yet:
// not ready).
func readyAll(checks ...func() error) error {
	for _, check := range checks {
		if check == nil {
			return errors.New("starting")
		}
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}
