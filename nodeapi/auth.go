package nodeapi

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// requestAttributes is upstream kubelet's description of a request to
// the authorizer (pkg/kubelet/server/auth.go, v1.37, where fine-grained
// authorization is GA): verb on nodes/<subresource> of this node, the
// verb from the method, the subresource from the path. /pods,
// /runningpods, /healthz and /configz are first asked as their own
// subresource (pods, healthz, configz), then as nodes/proxy; /stats,
// /metrics, /logs, /checkpoint, /statusz and /flagz (configz) as theirs
// alone; every other path as nodes/proxy.
func requestAttributes(u user.Info, node string, r *http.Request) []authorizer.Attributes {
	var verb string
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodGet:
		verb = "get"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	p := path.Clean(r.URL.Path)
	under := func(prefix string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }
	var subresources []string
	switch {
	case under("/allocatedPods"), under("/pods"), under("/runningpods"):
		subresources = append(subresources, "pods")
	case under("/healthz"):
		subresources = append(subresources, "healthz")
	case under("/configz"):
		subresources = append(subresources, "configz")
	}
	switch {
	case under("/stats"):
		subresources = append(subresources, "stats")
	case under("/metrics"):
		subresources = append(subresources, "metrics")
	case under("/logs"):
		subresources = append(subresources, "log") // as pods/log
	case under("/checkpoint"):
		subresources = append(subresources, "checkpoint")
	case under("/statusz"):
		subresources = append(subresources, "statusz")
	case under("/flagz"):
		subresources = append(subresources, "configz")
	default:
		subresources = append(subresources, "proxy")
	}
	attrs := make([]authorizer.Attributes, 0, len(subresources))
	for _, sub := range subresources {
		attrs = append(attrs, authorizer.AttributesRecord{User: u, Verb: verb, APIVersion: "v1", Resource: "nodes",
			Subresource: sub, Name: node, ResourceRequest: true, Path: r.URL.Path})
	}
	return attrs
}

// certificateAuthenticator is the default Authenticator: client
// certificates of the cluster CA (common name the user, organizations the
// groups), as upstream's x509 authenticator reads them, in
// system:authenticated.
func certificateAuthenticator(cas *x509.CertPool) authenticator.Request {
	opts := x509.VerifyOptions{Roots: cas, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	return group.NewAuthenticatedGroupAdder(x509request.New(opts, x509request.CommonNameUserConversion))
}

// allowListAuthorizer is the default Authorizer: the named users and the
// members of the named groups may do anything, nobody else anything.
func allowListAuthorizer(users, groups []string) authorizer.UnconditionalAuthorizer {
	return authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		u := a.GetUser()
		if slices.Contains(users, u.GetName()) || slices.ContainsFunc(u.GetGroups(), func(g string) bool { return slices.Contains(groups, g) }) {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
}

// authorize is upstream kubelet's filter (InstallAuthFilter): a caller
// that is not authenticated, or whose authentication failed, gets 401;
// one whose every description of the request is refused gets 403; an
// authorizer that failed, 500. The answers are upstream's plain texts.
func (s *Server) authorize(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, ok, err := s.cfg.Authenticator.AuthenticateRequest(r)
		if err != nil {
			s.log.Warn("unable to authenticate the request", "err", err)
		}
		if err != nil || !ok {
			writeText(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		attrs := requestAttributes(resp.User, s.cfg.NodeName, r)
		subresources := make([]string, 0, len(attrs))
		for _, a := range attrs {
			subresources = append(subresources, a.GetSubresource())
			decision, _, err := s.cfg.Authorizer.Authorize(r.Context(), a)
			if err != nil {
				s.log.Warn("authorization error", "user", resp.User.GetName(), "verb", a.GetVerb(), "subresource", a.GetSubresource(), "err", err)
				writeText(w, http.StatusInternalServerError, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)",
					resp.User.GetName(), a.GetVerb(), a.GetResource(), a.GetSubresource()))
				return
			}
			if decision == authorizer.DecisionAllow {
				h.ServeHTTP(w, r)
				return
			}
		}
		s.log.Debug("forbidden", "user", resp.User.GetName(), "verb", attrs[0].GetVerb(), "subresources", subresources)
		writeText(w, http.StatusForbidden, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource(s)=%v)\n",
			resp.User.GetName(), attrs[0].GetVerb(), attrs[0].GetResource(), subresources))
	})
}

// writeText answers as go-restful's WriteErrorString: the status and the
// text as it is.
func writeText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	io.WriteString(w, text)
}
