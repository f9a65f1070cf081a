package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// maxRedirects is the default limit of Go's HTTP client, kept by
// upstream's redirect checker.
const maxRedirects = 10

// newHTTPTransport is upstream's probe transport: no proxy, no keep-alive
// (each probe opens its own connection), no compression (no
// Accept-Encoding header) and no certificate verification.
func newHTTPTransport(dial DialFunc) *http.Transport {
	return &http.Transport{
		Proxy:       nil,
		DialContext: dial,
		// Probes check liveness, not identity, as upstream's.
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as upstream
		TLSHandshakeTimeout: 10 * time.Second,
		DisableKeepAlives:   true,
		DisableCompression:  true,
		ForceAttemptHTTP2:   true,
	}
}

// newHTTPRequest is upstream's NewRequestForHTTPGetAction: the URL from
// the action (host defaults to the pod IP, the port may be named), its
// headers, a User-Agent and an Accept: */* unless the action sets them
// (an empty Accept removes it), and the Host header as the request's host.
func newHTTPRequest(ctx context.Context, a *corev1.HTTPGetAction, c *corev1.Container, podIP, userAgent string) (*http.Request, error) {
	scheme := strings.ToLower(string(a.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	host := a.Host
	if host == "" {
		host = podIP
	}
	port, err := resolvePort(a.Port, c)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(a.Path)
	if err != nil {
		// A broken path is passed along as is, as upstream does.
		u = &url.URL{Path: a.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("http probe request for %s: %w", u, err)
	}
	headers := make(http.Header, len(a.HTTPHeaders)+2)
	for _, hd := range a.HTTPHeaders {
		headers.Add(hd.Name, hd.Value)
	}
	if _, ok := headers["User-Agent"]; !ok {
		headers.Set("User-Agent", userAgent)
	}
	if _, ok := headers["Accept"]; !ok {
		headers.Set("Accept", "*/*")
	} else if headers.Get("Accept") == "" {
		headers.Del("Accept")
	}
	req.Header = headers
	req.Host = headers.Get("Host")
	return req, nil
}

// httpProbe is upstream's DoHTTPProbe: 200 <= code < 400 is a success (a
// redirect that was not followed a warning), another code a failure;
// a request that fails (refused, timed out) is a failure with its error.
func (h *handlers) httpProbe(req *http.Request, timeout time.Duration) (Result, string, error) {
	client := &http.Client{Timeout: timeout, Transport: h.transport, CheckRedirect: sameHostRedirects}
	res, err := client.Do(req)
	if err != nil {
		return Failure, err.Error(), nil
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxOutputLength))
	if err != nil {
		return Failure, "", fmt.Errorf("read http probe response of %s: %w", req.URL, err)
	}
	body := string(b)
	if res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusBadRequest {
		if res.StatusCode >= http.StatusMultipleChoices {
			return Warning, "Probe terminated redirects, Response body: " + body, nil
		}
		return Success, body, nil
	}
	// The body is not part of the message (upstream issue 99425).
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode), nil
}

// sameHostRedirects follows redirects to the probed host only (any port
// or scheme), at most maxRedirects; a redirect elsewhere ends the probe
// with the redirect response.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// HTTPGet performs an httpGet lifecycle hook as upstream's kubelet does:
// the probes' request (host defaulting to podIP, named ports, headers)
// and transport (no proxy, no keep-alive); a 2xx or 3xx answer is
// success, anything else an error naming the status.
func HTTPGet(ctx context.Context, a *corev1.HTTPGetAction, c *corev1.Container, podIP string) error {
	req, err := newHTTPRequest(ctx, a, c, podIP, DefaultUserAgent)
	if err != nil {
		return err
	}
	t := newHTTPTransport(defaultDial())
	defer t.CloseIdleConnections()
	resp, err := t.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxOutputLength))
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
		return fmt.Errorf("HTTP lifecycle hook returned %s", resp.Status)
	}
	return nil
}
