package containerd_test

// Real concurrent pulls: the limit on parallel pulls, and one pull shared
// by the callers that ask for the same image at once. A proxy in front of
// the registry delays every response, so that pulls allowed to run
// together overlap, and counts the repositories with requests in flight.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/runtime/runtimetest"
	"github.com/nodelet/nodelet/test/testkit/testregistry"
)

// ensureAll calls EnsureImageWith for every ref at once.
func ensureAll(t *testing.T, rt *containerd.Runtime, policy corev1.PullPolicy, refs ...string) []runtime.Image {
	t.Helper()
	imgs := make([]runtime.Image, len(refs))
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	for i, ref := range refs {
		wg.Go(func() {
			var res runtime.PullResult
			imgs[i], res, errs[i] = rt.EnsureImageWith(context.Background(), ref, runtime.PullOptions{Policy: policy})
			if errs[i] == nil && !res.Pulled {
				errs[i] = fmt.Errorf("%s was not pulled", ref)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return imgs
}

func TestPullParallelism(t *testing.T) {
	testregistry.BlockDNS(t)
	addr := runtimetest.StartContainerd(t)
	reg := testregistry.Start(t, "", "")
	proxy, _ := testregistry.StartProxy(t, reg.Host, testregistry.ProxyOptions{Delay: 100 * time.Millisecond})
	src := testregistry.NewImageSource(t)
	var refs []string
	for _, name := range []string{"a", "b", "c"} {
		// Distinct images: each has its own config and manifest.
		src.Push(t, reg, "par/"+name+":1.36", "IMAGE="+name)
		refs = append(refs, proxy.Host+"/par/"+name+":1.36")
	}

	limits := []struct {
		name        string
		maxParallel int
		want        int // repositories in flight at most, and at some point
	}{
		{"serialized by default", 0, 1},
		{"two at a time", 2, 2},
		{"no limit", -1, 3},
	}
	for _, tt := range limits {
		t.Run(tt.name, func(t *testing.T) {
			rt := newPullRuntime(t, addr, containerd.Config{Registry: containerd.RegistryConfig{MaxParallelPulls: tt.maxParallel}})
			proxy.Reset()
			ensureAll(t, rt, corev1.PullIfNotPresent, refs...)
			if got := proxy.MaxRepos(); got != tt.want {
				t.Errorf("at most %d pulls in flight, want %d", got, tt.want)
			}
		})
	}

	t.Run("same image shares one pull", func(t *testing.T) {
		rt := newPullRuntime(t, addr, containerd.Config{Registry: containerd.RegistryConfig{MaxParallelPulls: -1}})
		proxy.Reset()
		imgs := ensureAll(t, rt, corev1.PullAlways, refs[0], refs[0], refs[0], refs[0])
		if n := proxy.Count("HEAD", "/manifests/1.36"); n != 1 {
			t.Errorf("%d manifest HEAD requests for 4 callers, want 1: %v", n, proxy.List())
		}
		for _, img := range imgs[1:] {
			if img.ID != imgs[0].ID {
				t.Errorf("callers got different images: %s, %s", img.ID, imgs[0].ID)
			}
		}
	})
}
