package apiserver

import (
	"context"
	"net/http"
	"net/url"
)

// NodeConnector tells the API server how to reach a node's nodelet: the
// base URL of its HTTPS API (scheme, host and port from the Node's
// status) and a transport that verifies the nodelet's serving certificate
// and presents the API server's client identity.
type NodeConnector interface {
	NodeLocation(ctx context.Context, nodeName string) (*url.URL, http.RoundTripper, error)
}
