package apiserver

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiproxy "k8s.io/apiserver/pkg/util/proxy"
)

// servePodLog checks the PodLogOptions in the query and streams the
// container's log from the nodelet's /containerLogs: as the node answers
// to a plain GET, and as a WebSocket stream (upstream's StreamObject: the
// binary.k8s.io and base64.binary.k8s.io protocols) to an upgrade.
func (s *Server) servePodLog(w http.ResponseWriter, r *http.Request, pod *corev1.Pod, q url.Values) error {
	resp, err := s.openPodLog(r, pod, q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if wsstream.IsWebSocketRequest(r) {
		return s.servePodLogWebSocket(w, r, pod, resp)
	}
	for _, h := range []string{"Content-Type", "Content-Length"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	if follow, _ := strconv.ParseBool(q.Get("follow")); follow {
		copyFlushing(w, resp.Body)
	} else {
		// As upstream: flush only when following; a whole log goes in big writes.
		io.CopyBuffer(w, resp.Body, make([]byte, 64<<10))
	}
	return nil
}

// openPodLog asks pod's node for the log the query describes.
func (s *Server) openPodLog(r *http.Request, pod *corev1.Pod, q url.Values) (*http.Response, error) {
	container, err := podContainer(pod, q.Get("container"))
	if err != nil {
		return nil, err
	}
	nodeQuery, err := logQuery(pod.Name, q)
	if err != nil {
		return nil, err
	}
	base, rt, err := s.nodeOf(r, pod)
	if err != nil {
		return nil, err
	}
	loc := *base
	loc.Path = path.Join("/containerLogs", pod.Namespace, pod.Name, container)
	loc.RawQuery = nodeQuery.Encode()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, loc.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("get logs of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("get logs from node %s: %v", pod.Spec.NodeName, err))
	}
	return resp, nil
}

// servePodLogWebSocket streams a log over a WebSocket. A refusal of the
// node is answered before the upgrade, as a Status (upstream's generic
// response checker), since the stream itself has no way to carry one.
func (s *Server) servePodLogWebSocket(w http.ResponseWriter, r *http.Request, pod *corev1.Pod, resp *http.Response) error {
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return apierrors.NewGenericServerResponse(resp.StatusCode, "get",
			corev1.Resource("pods/log"), pod.Name, strings.TrimSpace(string(body)), 0, false)
	}
	// wsstream's copy drops the bytes of a Read that also returns io.EOF,
	// as the last Read of a body with a Content-Length does. A
	// bufio.Reader larger than its 2 KiB reads returns them, and the EOF
	// in the next call. The WebSocket is kept alive with pings, as upstream's.
	body := bufio.NewReaderSize(resp.Body, 32<<10)
	if err := wsstream.NewReader(body, true, wsstream.NewDefaultReaderProtocols()).Copy(w, r); err != nil {
		s.log.Debug("pod log over websocket ended", "namespace", pod.Namespace, "pod", pod.Name, "err", err)
	}
	return nil
}

// logQuery validates the PodLogOptions parameters (as upstream's
// ValidatePodLogOptions) and returns them for the nodelet.
func logQuery(podName string, q url.Values) (url.Values, error) {
	out := url.Values{}
	var errs field.ErrorList
	for _, b := range []string{"follow", "previous", "timestamps"} {
		if v := q.Get(b); v != "" {
			if _, err := strconv.ParseBool(v); err != nil {
				errs = append(errs, field.Invalid(field.NewPath(b), v, "must be a boolean"))
				continue
			}
			out.Set(b, v)
		}
	}
	for _, n := range []struct {
		name string
		min  int64
	}{{"tailLines", 0}, {"sinceSeconds", 1}, {"limitBytes", 1}} {
		v := q.Get(n.name)
		if v == "" {
			continue
		}
		i, err := strconv.ParseInt(v, 10, 64)
		if err != nil || i < n.min {
			errs = append(errs, field.Invalid(field.NewPath(n.name), v, fmt.Sprintf("must be an integer greater than or equal to %d", n.min)))
			continue
		}
		out.Set(n.name, v)
	}
	if v := q.Get("sinceTime"); v != "" {
		if _, err := time.Parse(time.RFC3339, v); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("sinceTime"), v, "must be an RFC3339 time"))
		}
		out.Set("sinceTime", v)
	}
	if out.Has("sinceSeconds") && out.Has("sinceTime") {
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, podName, errs)
	}
	return out, nil
}

// copyFlushing copies a (possibly endless, for follow) log stream,
// flushing each chunk so that a new line reaches the client at once.
func copyFlushing(w http.ResponseWriter, r io.Reader) {
	f, _ := w.(http.Flusher)
	buf := make([]byte, 32*1024)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// serveStream proxies pods/exec and pods/attach to the nodelet's /exec and
// /attach, translating kubectl's WebSocket protocol to SPDY on the way.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, pod *corev1.Pod, sub string, q url.Values) error {
	container, err := podContainer(pod, q.Get("container"))
	if err != nil {
		return err
	}
	opts := apiproxy.Options{Stdin: isTrue(q["stdin"]), Stdout: isTrue(q["stdout"]), Stderr: isTrue(q["stderr"]), Tty: isTrue(q["tty"])}
	if sub == "exec" && len(q["command"]) == 0 {
		return apierrors.NewBadRequest("you must specify at least 1 command")
	}
	if !opts.Stdin && !opts.Stdout && !opts.Stderr {
		return apierrors.NewBadRequest("you must specify at least 1 of stdin, stdout, stderr")
	}
	if opts.Tty && opts.Stderr {
		// As upstream: with a terminal, stderr is stdout.
		opts.Stderr = false
	}
	base, rt, err := s.nodeOf(r, pod)
	if err != nil {
		return err
	}
	nodeQuery := url.Values{}
	for _, c := range q["command"] {
		nodeQuery.Add("command", c)
	}
	for param, on := range map[string]bool{"input": opts.Stdin, "output": opts.Stdout, "error": opts.Stderr, "tty": opts.Tty} {
		if on {
			nodeQuery.Set(param, "1")
		}
	}
	loc := *base
	loc.Path = path.Join("/"+sub, pod.Namespace, pod.Name, container)
	loc.RawQuery = nodeQuery.Encode()
	if wsstream.IsWebSocketRequestWithStreamCloseProtocol(r) {
		apiproxy.NewStreamTranslatorHandler(&loc, rt, 0, opts).ServeHTTP(w, r)
		return nil
	}
	s.upgradeHandler(&loc, rt, true).ServeHTTP(w, r)
	return nil
}
