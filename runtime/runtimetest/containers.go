package runtimetest

import (
	"context"
	"testing"
	"time"

	ctrdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
)

// ContainerRecords connects to the containerd at addr and returns a
// function that creates bare container records in namespace ns: an image,
// labels, an empty spec, no snapshot and no task. Tests use them to stand
// for containers the code under test did not start itself (exited pods of
// an earlier nodelet, a container holding an image in use) without going
// around the runtime's API for anything else. A failed creation fails the
// test; the connection is closed at cleanup.
func ContainerRecords(t testing.TB, addr, ns string) func(id, image string, labels map[string]string) {
	t.Helper()
	client, err := ctrdclient.New(addr, ctrdclient.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatalf("runtimetest: connect to containerd at %s: %v", addr, err)
	}
	t.Cleanup(func() { client.Close() })
	ctx := namespaces.WithNamespace(context.Background(), ns)
	return func(id, image string, labels map[string]string) {
		t.Helper()
		if _, err := client.NewContainer(ctx, id, ctrdclient.WithImageName(image),
			ctrdclient.WithSpec(&oci.Spec{}), ctrdclient.WithContainerLabels(labels)); err != nil {
			t.Fatalf("runtimetest: create container record %s/%s (image %s): %v", ns, id, image, err)
		}
	}
}
