package upstream

import (
	"context"
	"errors"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/certificates/rootcacertpublisher"
	"k8s.io/kubernetes/pkg/controller/serviceaccount"
)

// What in-cluster clients find in every namespace, as
// kube-controller-manager makes it: the `default` ServiceAccount
// (recreated when deleted) and the kube-root-ca.crt ConfigMap holding the
// cluster CA, which the projected kube-api-access volume mounts. Upstream
// runs one worker for each.

func buildServiceAccounts(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	sac, err := serviceaccount.NewServiceAccountsController(klog.FromContext(ctx), f.Core().V1().ServiceAccounts(),
		f.Core().V1().Namespaces(), cs, serviceaccount.DefaultServiceAccountsControllerOptions())
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) { sac.Run(ctx, 1) }, nil
}

func buildRootCAPublisher(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	if len(cfg.RootCA) == 0 {
		return nil, errors.New("no root CA to publish (Config.RootCA)")
	}
	f := cfg.Informers
	pub, err := rootcacertpublisher.NewPublisher(f.Core().V1().ConfigMaps(), f.Core().V1().Namespaces(), cs, cfg.RootCA)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) { pub.Run(ctx, 1) }, nil
}

// buildTokens runs upstream's tokens controller, as kube-controller-manager
// does when it has the signing key: a Secret of type
// kubernetes.io/service-account-token that names an account gets a legacy
// token, the CA and the namespace (upstream no longer makes such Secrets
// by itself; users still create them). Build leaves it out without
// Config.Root and Config.LegacyTokens.
func buildTokens(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	tc, err := serviceaccount.NewTokensController(klog.FromContext(ctx), f.Core().V1().ServiceAccounts(), f.Core().V1().Secrets(), cs,
		serviceaccount.TokensControllerOptions{TokenGenerator: cfg.LegacyTokens, RootCA: cfg.RootCA})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) { tc.Run(ctx, tokensWorkers) }, nil
}
