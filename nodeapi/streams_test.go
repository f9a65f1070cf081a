package nodeapi

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/nodelet/nodelet/runtime"
)

func TestRun(t *testing.T) {
	n := newTestNode(t, nil)
	webPod(n)
	var exitCode int
	var fail error
	n.rt.exec = func(cmd []string, stdin io.Reader, stdout, stderr io.Writer) error {
		if stdin != nil {
			return errors.New("run got a stdin")
		}
		fmt.Fprintf(stdout, "out: %s\n", strings.Join(cmd, "|"))
		fmt.Fprintf(stderr, "err\n")
		if exitCode != 0 {
			return &runtime.ExitError{Code: exitCode}
		}
		return fail
	}

	code, body := n.do(t, "POST", "/run/default/web/app?cmd="+url.QueryEscape("echo  hello world"))
	if code != http.StatusOK || body != "out: echo|hello|world\nerr\n" {
		t.Errorf("run: %d %q", code, body)
	}
	if calls := n.rt.execCalls(); len(calls) != 1 || calls[0].id != "c-app" || calls[0].tty || !slices.Equal(calls[0].cmd, []string{"echo", "hello", "world"}) {
		t.Errorf("exec calls = %+v", calls)
	}

	// A command that fails still answers its output.
	exitCode = 2
	if code, body := n.do(t, "POST", "/run/default/web/app?cmd=false"); code != http.StatusOK || body != "out: false\nerr\n" {
		t.Errorf("failing command: %d %q", code, body)
	}
	// The runtime failing is an error.
	exitCode, fail = 0, errors.New("task gone")
	if code, body := n.do(t, "POST", "/run/default/web/app?cmd=true"); code != http.StatusInternalServerError || !strings.Contains(status(t, body).Message, "task gone") {
		t.Errorf("runtime error: %d %q", code, body)
	}

	before := len(n.rt.execCalls())
	for _, tt := range []struct {
		path string
		code int
		msg  string
	}{
		{"/run/default/web/app", 400, "missing cmd"},
		{"/run/default/web/app?cmd=+", 400, "missing cmd"},
		{"/run/default/web/init?cmd=ls", 400, `container "init" in pod "web" is not running (exited)`},
		{"/run/default/web/sidecar?cmd=ls", 400, "waiting to start"},
		{"/run/default/web/nosuch?cmd=ls", 404, "nosuch"},
		{"/run/default/nosuch/app?cmd=ls", 404, "nosuch"},
	} {
		code, body := n.do(t, "POST", tt.path)
		if code != tt.code || !strings.Contains(status(t, body).Message, tt.msg) {
			t.Errorf("%s: %d %s, want %d %q", tt.path, code, body, tt.code, tt.msg)
		}
	}
	if after := len(n.rt.execCalls()); after != before {
		t.Errorf("refused runs reached the runtime (%d calls)", after-before)
	}
}

// TestStreamsRefused checks that exec and port-forward answer a plain
// Status, before any upgrade, when there is nothing to connect to.
func TestStreamsRefused(t *testing.T) {
	n := newTestNode(t, nil)
	webPod(n)
	n.pods.add(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "idle", UID: "uid-idle"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
	})
	n.rt.set(&runtime.PodStatus{UID: "uid-idle", Sandboxes: []runtime.SandboxStatus{{ID: "sb-idle", State: runtime.StateExited}}})
	n.rt.exec = func([]string, io.Reader, io.Writer, io.Writer) error { return nil }
	for _, tt := range []struct {
		method, path string
		code         int
		msg          string
	}{
		{"POST", "/exec/default/web/init?command=ls&output=1", 400, `container "init" in pod "web" is not running (exited)`},
		{"GET", "/exec/default/web/init?command=ls&output=1", 400, "not running (exited)"},
		{"POST", "/exec/default/web/sidecar?command=ls&output=1", 400, "waiting to start"},
		{"POST", "/exec/default/idle/app?command=ls&output=1", 400, "waiting to start"},
		{"POST", "/exec/default/web/app?output=1", 400, "at least 1 command"},
		{"POST", "/exec/default/web/app?command=ls", 400, "at least 1 of stdin, stdout, stderr"},
		{"POST", "/exec/default/web/nosuch?command=ls&output=1", 404, "nosuch"},
		{"POST", "/exec/default/nosuch/app?command=ls&output=1", 404, "nosuch"},
		{"POST", "/portForward/default/idle", 400, `pod "idle" has no running sandbox`},
		{"GET", "/portForward/default/idle", 400, "no running sandbox"},
		{"POST", "/portForward/default/nosuch", 404, "nosuch"},
	} {
		code, body := n.do(t, tt.method, tt.path)
		if code != tt.code || !strings.Contains(status(t, body).Message, tt.msg) {
			t.Errorf("%s %s: %d %s, want %d %q", tt.method, tt.path, code, body, tt.code, tt.msg)
		}
	}
	// Refused before the upgrade: a SPDY client gets the Status, not 101.
	spdy := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"SPDY/3.1"}, "X-Stream-Protocol-Version": {"v4.channel.k8s.io", "portforward.k8s.io"}}
	for _, p := range []string{"/exec/default/web/init?command=ls&output=1", "/portForward/default/idle"} {
		code, body := n.doHeader(t, "apiserver", "POST", p, spdy)
		if st := status(t, body); code != http.StatusBadRequest || st.Code != http.StatusBadRequest {
			t.Errorf("upgrade to %s: %d %s", p, code, body)
		}
	}
	// A pod the runtime knows nothing of has no sandbox either.
	n.rt.mu.Lock()
	delete(n.rt.statuses, "uid-idle")
	n.rt.mu.Unlock()
	if code, body := n.do(t, "POST", "/portForward/default/idle"); code != 400 || !strings.Contains(body, "no running sandbox") {
		t.Errorf("pod without sandbox: %d %s", code, body)
	}
	if calls := n.rt.execCalls(); len(calls) != 0 {
		t.Errorf("refused execs reached the runtime: %+v", calls)
	}
}

// restConfig is a client-go configuration for the node as identity who.
func (n *testNode) restConfig(t *testing.T, who string) *rest.Config {
	t.Helper()
	cert := n.certs[who]
	keyDER, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: n.url, TLSClientConfig: rest.TLSClientConfig{
		CAData:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: n.ca.cert.Raw}),
		CertData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
		KeyData:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}}
}

func TestExecSPDY(t *testing.T) {
	n := newTestNode(t, nil)
	webPod(n)
	n.rt.exec = func(cmd []string, stdin io.Reader, stdout, stderr io.Writer) error {
		in, err := io.ReadAll(stdin)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s read %q", cmd[0], in)
		fmt.Fprint(stderr, "warning")
		if cmd[0] == "fail" {
			return &runtime.ExitError{Code: 3}
		}
		return nil
	}
	exec := func(command string) (string, string, error) {
		q := url.Values{"command": {command, "-x"}, "input": {"1"}, "output": {"1"}, "error": {"1"}}
		u, err := url.Parse(n.url + "/exec/default/web/app?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		ex, err := remotecommand.NewSPDYExecutor(n.restConfig(t, "apiserver"), "POST", u)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var out, errOut bytes.Buffer
		err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("input"), Stdout: &out, Stderr: &errOut})
		return out.String(), errOut.String(), err
	}
	out, errOut, err := exec("cat")
	if err != nil || out != `cat read "input"` || errOut != "warning" {
		t.Errorf("exec: %q %q %v", out, errOut, err)
	}
	if calls := n.rt.execCalls(); len(calls) != 1 || calls[0].id != "c-app" || !slices.Equal(calls[0].cmd, []string{"cat", "-x"}) {
		t.Errorf("exec calls = %+v", calls)
	}
	// The command's exit code reaches the caller.
	_, _, err = exec("fail")
	var exit utilexec.CodeExitError
	if !errors.As(err, &exit) || exit.Code != 3 {
		t.Errorf("failing command: %v (%T)", err, err)
	}
}

func TestPortForwardSPDY(t *testing.T) {
	n := newTestNode(t, nil)
	webPod(n)
	n.rt.forward = func(port int32, stream io.ReadWriteCloser) error {
		defer stream.Close()
		buf := make([]byte, 4)
		if _, err := io.ReadFull(stream, buf); err != nil {
			return err
		}
		_, err := fmt.Fprintf(stream, "%s from %d", buf, port)
		return err
	}
	cfg := n.restConfig(t, "admin")
	tr, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(n.url + "/portForward/default/web")
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, "POST", u)
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- pf.ForwardPorts() }()
	defer func() {
		close(stop)
		<-errc
	}()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("port-forward: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("port-forward not ready")
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("ports %v %v", ports, err)
	}
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != "ping from 8080" {
		t.Errorf("forwarded answer %q %v", got, err)
	}
}
