package upstream

import (
	"context"
	"sync"
	"time"

	certificatesinformers "k8s.io/client-go/informers/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/controller/bootstrap"
	"k8s.io/kubernetes/pkg/controller/certificates/approver"
	"k8s.io/kubernetes/pkg/controller/certificates/cleaner"
	"k8s.io/kubernetes/pkg/controller/certificates/signer"
)

// csrWorkers: kube-controller-manager runs the signing and approving
// controllers with 5 workers each and the cleaner with 1.
const csrWorkers = 5

// DefaultClusterSigningDuration is kube-controller-manager's
// --cluster-signing-duration: the longest certificate the signers issue
// (a CSR's spec.expirationSeconds may ask for less, 10 minutes at least).
const DefaultClusterSigningDuration = 365 * 24 * time.Hour

// Signing is the CA upstream's CSR signers issue certificates with, as
// kube-controller-manager's --cluster-signing-cert-file and
// --cluster-signing-key-file.
type Signing struct {
	CertFile, KeyFile string
	// Duration is --cluster-signing-duration; zero: the default.
	Duration time.Duration
}

// buildCertificates runs kube-controller-manager's certificate
// controllers under their account (certificate-controller): the signers of
// the four built-in signer names with the cluster CA, the approver of
// nodes' client certificates (kubelet bootstrap and renewal, decided by
// SubjectAccessReviews of the requester, so RBAC says who may join), and
// the cleaner of old requests. Without signing files only the approver
// and cleaner run.
func buildCertificates(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	informer := cfg.Informers.Certificates().V1().CertificateSigningRequests()
	var runs []func(context.Context)
	if s := cfg.Signing; s.CertFile != "" {
		ttl := s.Duration
		if ttl == 0 {
			ttl = DefaultClusterSigningDuration
		}
		for _, newSigner := range []func(context.Context, kubernetes.Interface, certInformer, string, string, time.Duration) (*signer.CSRSigningController, error){
			signer.NewKubeletServingCSRSigningController, signer.NewKubeletClientCSRSigningController,
			signer.NewKubeAPIServerClientCSRSigningController, signer.NewLegacyUnknownCSRSigningController,
		} {
			c, err := newSigner(ctx, cs, informer, s.CertFile, s.KeyFile, ttl)
			if err != nil {
				return nil, err
			}
			runs = append(runs, func(ctx context.Context) { c.Run(ctx, csrWorkers) })
		}
	}
	approving := approver.NewCSRApprovingController(ctx, cs, informer)
	cleaning := cleaner.NewCSRCleanerController(cs.CertificatesV1().CertificateSigningRequests(), informer)
	runs = append(runs, func(ctx context.Context) { approving.Run(ctx, csrWorkers) },
		func(ctx context.Context) { cleaning.Run(ctx, 1) })
	return runAll(runs), nil
}

// buildBootstrapSigner runs upstream's bootstrap signer: kube-public's
// cluster-info ConfigMap carries a JWS signature of its kubeconfig for
// every bootstrap token allowed to sign it, which a joining node checks
// before it trusts the CA in it (kubeadm's token discovery).
func buildBootstrapSigner(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers.Core().V1()
	s, err := bootstrap.NewSigner(cs, f.Secrets(), f.ConfigMaps(), bootstrap.DefaultSignerOptions())
	if err != nil {
		return nil, err
	}
	return s.Run, nil
}

// buildTokenCleaner runs upstream's token cleaner: expired bootstrap
// tokens' Secrets are deleted.
func buildTokenCleaner(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	c, err := bootstrap.NewTokenCleaner(cs, cfg.Informers.Core().V1().Secrets(), bootstrap.DefaultTokenCleanerOptions())
	if err != nil {
		return nil, err
	}
	return c.Run, nil
}

type certInformer = certificatesinformers.CertificateSigningRequestInformer

// runAll runs every function until ctx ends.
func runAll(runs []func(context.Context)) func(context.Context) {
	return func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, run := range runs {
			wg.Go(func() { run(ctx) })
		}
		wg.Wait()
	}
}
