package containerd

import (
	"context"

	ctrdclient "github.com/containerd/containerd/v2/client"
)

// ClientForTest is the runtime's containerd client, for this package's
// tests to look at what the runtime created or left behind; the API keeps
// the client to itself.
func (c *Runtime) ClientForTest() *ctrdclient.Client { return c.client }

// NamespaceForTest is ctx with the runtime's containerd namespace, for
// calls on ClientForTest.
func (c *Runtime) NamespaceForTest(ctx context.Context) context.Context { return c.nsCtx(ctx) }
