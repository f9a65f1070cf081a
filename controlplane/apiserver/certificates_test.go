package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"slices"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/controlplane/storage"
)

func csrPEM(t testing.TB, cn string, orgs ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// CertificateSigningRequests as upstream's three strategies serve them:
// the requester comes from the request's user whatever the body says,
// the main resource changes neither spec nor status, approval only the
// conditions, status the certificate while keeping the approval; the
// table summarises the condition.
func TestCertificateSigningRequests(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	csrs := cs.CertificatesV1().CertificateSigningRequests()

	in := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "node-csr-1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: csrPEM(t, "system:node:n1", "system:nodes"), SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:   []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			Username: "someone-else", Groups: []string{"system:masters"}},
		Status: certificatesv1.CertificateSigningRequestStatus{Certificate: []byte("forged")}}
	created, err := csrs.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.Spec.Username != "admin" || !slices.Contains(created.Spec.Groups, "system:masters") || len(created.Status.Certificate) != 0 {
		t.Errorf("created: username %q groups %v certificate %q: want the request's user and no certificate",
			created.Spec.Username, created.Spec.Groups, created.Status.Certificate)
	}
	_, err = csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: []byte("not a request"), SignerName: "example.com/x",
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}}}, metav1.CreateOptions{})
	wantStatus(t, "unparseable request", err, 422)

	upd := created.DeepCopy()
	upd.Spec.SignerName = "example.com/other"
	upd.Labels = map[string]string{"a": "b"}
	got, err := csrs.Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil || got.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || got.Labels["a"] != "b" {
		t.Fatalf("update of the main resource: %v, signer %q labels %v: want metadata changed, spec kept", err, got.Spec.SignerName, got.Labels)
	}

	appr := got.DeepCopy()
	appr.Status.Conditions = append(appr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test", Message: "ok"})
	appr.Status.Certificate = []byte("ignored by approval")
	approved, err := csrs.UpdateApproval(ctx, appr.Name, appr, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	if len(approved.Status.Conditions) != 1 || approved.Status.Conditions[0].LastUpdateTime.IsZero() || len(approved.Status.Certificate) != 0 {
		t.Errorf("approved status %+v: want one stamped condition and no certificate", approved.Status)
	}
	deny := approved.DeepCopy()
	deny.Status.Conditions = append(deny.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue})
	_, err = csrs.UpdateApproval(ctx, deny.Name, deny, metav1.UpdateOptions{})
	wantStatus(t, "approved and denied", err, 422)

	signed := approved.DeepCopy()
	signed.Status.Certificate = []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	signed.Status.Conditions[0].Reason = "Rewritten"
	_, err = csrs.UpdateStatus(ctx, signed, metav1.UpdateOptions{})
	wantStatus(t, "an unparseable certificate", err, 422)

	code, _, body := rawDo(t, env, "GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests", "", tableAccept, nil)
	if code != 200 || !strings.Contains(string(body), `"Approved"`) || !strings.Contains(string(body), `"kubernetes.io/kube-apiserver-client-kubelet"`) {
		t.Errorf("table: HTTP %d: %s", code, body)
	}
	list, err := csrs.List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=kubernetes.io/kube-apiserver-client-kubelet"})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("list by signer: %v, %d items", err, len(list.Items))
	}
}

// Clients that speak protobuf (client-go's informers and controllers when
// configured so) create and read CSRs in it.
func TestCertificateSigningRequestsProtobuf(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cfg := rest.CopyConfig(env.config)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf"
	csrs := newClientset(t, cfg).CertificatesV1().CertificateSigningRequests()
	created, err := csrs.Create(testCtx(t), &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: csrPEM(t, "system:node:n1", "system:nodes"),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}}}, metav1.CreateOptions{})
	if err != nil || created.Spec.Username != "admin" {
		t.Fatalf("protobuf create: %+v, %v", created, err)
	}
	if list, err := csrs.List(testCtx(t), metav1.ListOptions{}); err != nil || len(list.Items) != 1 {
		t.Fatalf("protobuf list: %v", err)
	}
}
