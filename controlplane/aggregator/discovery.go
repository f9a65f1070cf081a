package aggregator

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/transport"

	"github.com/nodelet/nodelet/controlplane/apiserver"
)

// maxDiscoveryBytes bounds an extension server's resource list.
const maxDiscoveryBytes = 4 << 20

// fetchResources reads the extension server's legacy resource list for
// its group-version (GET /apis/GROUP/VERSION), as system:kube-aggregator
// in system:masters, the identity upstream's aggregator uses for it.
func fetchResources(ctx context.Context, r *Resolver, cert *tls.Certificate, api *apiserver.RemoteAPI) (*metav1.APIResourceList, error) {
	rt, err := apiserver.NewRemoteTransport(cert, api)
	if err != nil {
		return nil, err
	}
	loc, err := r.ResolveEndpoint(api.Namespace, api.Service, api.Port)
	if err != nil {
		return nil, err
	}
	loc.Path = "/apis/" + api.GroupVersion.Group + "/" + api.GroupVersion.Version
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	transport.SetAuthProxyHeaders(req, "system:kube-aggregator", "", []string{"system:masters"}, nil)
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDiscoveryBytes))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", loc.Path, resp.Status)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET %s: %w", loc.Path, err)
	}
	if list.GroupVersion != api.GroupVersion.String() {
		return nil, fmt.Errorf("GET %s: the server lists %q", loc.Path, list.GroupVersion)
	}
	return &list, nil
}
