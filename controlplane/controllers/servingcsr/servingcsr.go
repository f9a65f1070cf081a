// Package servingcsr approves nodes' serving certificates: a
// CertificateSigningRequest for signer kubernetes.io/kubelet-serving is
// approved when a node asks for itself (requester and subject
// system:node:NAME in system:nodes, upstream's kubelet-serving shape) and
// every DNS name and IP address it names is one the Node object reports.
// Upstream leaves these requests to a human or an external approver
// (kubeadm's docs suggest one); a node joining by token here gets a
// serving certificate the API server trusts with nothing else to run.
//
// A request that does not fit is left pending for `kubectl certificate
// approve|deny`; one whose Node is not there yet, or does not yet report
// the names, is retried with backoff.
package servingcsr

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	capi "k8s.io/kubernetes/pkg/apis/certificates"
	"k8s.io/kubernetes/pkg/controller/certificates"
)

// Config wires the approver.
type Config struct {
	// Client writes approvals (as its own ServiceAccount).
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	Log       *slog.Logger
}

// Approver is the controller.
type Approver struct {
	cfg   Config
	nodes corelisters.NodeLister
	cc    *certificates.CertificateController
	log   *slog.Logger
}

// New registers the approver's handlers on cfg.Informers.
func New(ctx context.Context, cfg Config) *Approver {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	a := &Approver{cfg: cfg, nodes: cfg.Informers.Core().V1().Nodes().Lister(),
		log: cfg.Log.With("component", "kubelet-serving-approver")}
	a.cc = certificates.NewCertificateController(ctx, "kubelet-serving-approver", cfg.Client,
		cfg.Informers.Certificates().V1().CertificateSigningRequests(), a.handle)
	return a
}

// Run approves until ctx ends.
func (a *Approver) Run(ctx context.Context, workers int) error {
	a.cc.Run(ctx, workers)
	return nil
}

func (a *Approver) handle(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || len(csr.Status.Certificate) > 0 {
		return nil
	}
	if approved, denied := certificates.GetCertApprovalCondition(&csr.Status); approved || denied {
		return nil
	}
	req, err := capi.ParseCSR(csr.Spec.Request)
	if err != nil {
		return nil // validation let it in; nothing to approve
	}
	name, ok := requestingNode(csr, req)
	if !ok {
		return nil
	}
	node, err := a.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return certificates.IgnorableError("node %s of %s is not registered yet", name, csr.Name)
	}
	if err != nil {
		return err
	}
	if missing := uncovered(req, node); len(missing) > 0 {
		return certificates.IgnorableError("%s names %v, which node %s does not report", csr.Name, missing, name)
	}
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved",
		Message: fmt.Sprintf("Auto approving the serving certificate of node %s: it names only the node's own names and addresses.", name),
	})
	if _, err := a.cfg.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("approve %s: %w", csr.Name, err)
	}
	a.log.Info("approved", "csr", csr.Name, "node", name)
	return nil
}

// requestingNode is the node a kubelet-serving request is from and for:
// the requester is system:node:NAME in system:nodes and the request has
// upstream's kubelet-serving shape with that same common name.
func requestingNode(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) (string, bool) {
	name, ok := strings.CutPrefix(csr.Spec.Username, "system:node:")
	if !ok || name == "" || !slices.Contains(csr.Spec.Groups, "system:nodes") || req.Subject.CommonName != csr.Spec.Username {
		return "", false
	}
	usages := sets.New[string]()
	for _, u := range csr.Spec.Usages {
		usages.Insert(string(u))
	}
	if !capi.IsKubeletServingCSR(req, sets.String(usages)) {
		return "", false
	}
	return name, true
}

// uncovered lists the request's DNS names and IPs the node does not
// report in its status.
func uncovered(req *x509.CertificateRequest, node *corev1.Node) []string {
	names, ips := sets.New[string](), sets.New[string]()
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			names.Insert(a.Address)
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			ips.Insert(a.Address)
		}
	}
	var missing []string
	for _, d := range req.DNSNames {
		if !names.Has(d) {
			missing = append(missing, d)
		}
	}
	for _, ip := range req.IPAddresses {
		if !ips.Has(ip.String()) {
			missing = append(missing, ip.String())
		}
	}
	return missing
}
