package controlplanetest

import (
	"context"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/controlplane/admissionplugins"
	"github.com/nodelet/nodelet/controlplane/apiserver"
	"github.com/nodelet/nodelet/controlplane/apivalidation"
)

// UpstreamAdmission is an Options.Admission: the control plane's chain of
// upstream plugins (admissionplugins.DefaultPlugins) with every request
// authorized, its informers on the loopback client and stopped when the
// test ends.
func UpstreamAdmission(tb testing.TB, loopback *rest.Config) []apiserver.Admission {
	tb.Helper()
	return AdmissionWith()(tb, loopback)
}

// AdmissionWith is an Options.Admission of the named plugins only (all of
// the default ones when none is named): for tests that run no
// ServiceAccount controller, say, Priority alone.
func AdmissionWith(plugins ...string) func(testing.TB, *rest.Config) []apiserver.Admission {
	return func(tb testing.TB, loopback *rest.Config) []apiserver.Admission {
		return upstreamAdmission(tb, loopback, plugins)
	}
}

func upstreamAdmission(tb testing.TB, loopback *rest.Config, plugins []string) []apiserver.Admission {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(loopback)
	if err != nil {
		tb.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(loopback)
	if err != nil {
		tb.Fatal(err)
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	ctx, cancel := context.WithCancel(context.Background())
	chain, err := admissionplugins.New(admissionplugins.Config{Validator: apivalidation.New(), Client: cs, Dynamic: dyn, Informers: f,
		Authorizer: apiserver.AllowAuthenticated, Plugins: plugins, Stop: ctx.Done()})
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	f.Start(ctx.Done())
	tb.Cleanup(func() { cancel(); f.Shutdown() })
	return []apiserver.Admission{chain}
}
