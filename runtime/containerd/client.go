package containerd

import (
	"context"
	"fmt"
	"time"

	ctrdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// DefaultNamespace is the containerd namespace the nodelet keeps its
// images, sandboxes and containers in, apart from anything else on the host.
const DefaultNamespace = "nodelet"

// connect dials containerd at address and checks that it answers. The
// returned context carries the containerd namespace every call must use.
func connect(ctx context.Context, address, namespace string) (*ctrdclient.Client, context.Context, error) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	client, err := ctrdclient.New(address, ctrdclient.WithTimeout(10*time.Second))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to containerd at %s: %w", address, err)
	}
	nsCtx := namespaces.WithNamespace(ctx, namespace)
	if _, err := client.Version(nsCtx); err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("containerd at %s does not answer: %w", address, err)
	}
	return client, nsCtx, nil
}
