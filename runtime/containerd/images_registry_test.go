package containerd_test

// Real pulls from Debian's docker-registry on loopback: credentials from
// image pull secrets, localhost over plain HTTP, and the pull policies.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/images"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/runtime/runtimetest"
	"github.com/nodelet/nodelet/test/testkit/testregistry"
)

// newPullRuntime connects a runtime to the containerd at addr in a
// namespace of its own; at cleanup its images go (with a synchronous
// garbage collection, so that the next pull fetches the blobs again).
func newPullRuntime(t *testing.T, addr string, cfg containerd.Config) *containerd.Runtime {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	cfg.Address, cfg.Namespace = addr, "pull-"+hex.EncodeToString(b)
	rt, err := containerd.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		removeImages(t, rt)
		rt.Close()
	})
	return rt
}

// removeImages deletes every image of the runtime's namespace.
func removeImages(t *testing.T, rt *containerd.Runtime) {
	t.Helper()
	ctx := rt.NamespaceForTest(context.Background())
	is := rt.ClientForTest().ImageService()
	list, err := is.List(ctx)
	if err != nil {
		t.Errorf("list images: %v", err)
		return
	}
	for _, img := range list {
		if err := is.Delete(ctx, img.Name, images.SynchronousDelete()); err != nil {
			t.Errorf("delete image %s: %v", img.Name, err)
		}
	}
}

// dockerConfigJSON is a kubernetes.io/dockerconfigjson secret with user
// and password for each location.
func dockerConfigJSON(t *testing.T, name string, auths map[string][2]string) *corev1.Secret {
	t.Helper()
	doc := map[string]map[string]map[string]string{"auths": {}}
	for loc, up := range auths {
		doc["auths"][loc] = map[string]string{"username": up[0], "password": up[1]}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: data},
	}
}

// dockercfg is a legacy kubernetes.io/dockercfg secret with the "auth"
// field (base64 of user:password) for loc.
func dockercfg(t *testing.T, name, loc, user, password string) *corev1.Secret {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	data, err := json.Marshal(map[string]map[string]string{loc: {"auth": auth, "email": "ops@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Type:       corev1.SecretTypeDockercfg,
		Data:       map[string][]byte{corev1.DockerConfigKey: data},
	}
}

// checkPulled checks a successful pull of ref: a pull happened, the image
// is described and unpacked in containerd.
func checkPulled(t *testing.T, rt *containerd.Runtime, img runtime.Image, res runtime.PullResult, ref string) {
	t.Helper()
	if !res.Pulled || res.Duration <= 0 || res.WithWaiting < res.Duration {
		t.Errorf("pull result = %+v, want a pull", res)
	}
	repo := strings.TrimSuffix(ref, ":1.36") // every test image is tagged 1.36
	if img.Ref != ref || !strings.HasPrefix(img.ID, "sha256:") || !strings.HasPrefix(img.RepoDigest, repo+"@sha256:") ||
		img.Size <= 0 || len(img.Config.Cmd) == 0 || img.Config.Cmd[0] != "sh" {
		t.Errorf("image = %+v", img)
	}
	ctx := rt.NamespaceForTest(context.Background())
	ci, err := rt.ClientForTest().GetImage(ctx, ref)
	if err != nil {
		t.Fatalf("pulled image %s not in containerd: %v", ref, err)
	}
	if ok, err := ci.IsUnpacked(ctx, ""); err != nil || !ok {
		t.Errorf("image %s unpacked = %v, %v", ref, ok, err)
	}
}

// wantPullError checks that err is an ErrImagePull that says what.
func wantPullError(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, runtime.ErrImagePull) {
		t.Fatalf("error = %v, want ErrImagePull", err)
	}
	if !strings.Contains(err.Error(), what) {
		t.Errorf("error = %v, want it to say %q", err, what)
	}
}

func TestPullWithPullSecrets(t *testing.T) {
	testregistry.BlockDNS(t)
	addr := runtimetest.StartContainerd(t)
	reg := testregistry.Start(t, "puller", "s3cret")
	src := testregistry.NewImageSource(t)
	src.Push(t, reg, "team/busybox:1.36")
	ref := reg.Host + "/team/busybox:1.36"
	right := [2]string{"puller", "s3cret"}
	wrong := [2]string{"puller", "wrong"}
	tests := []struct {
		name    string
		secrets []*corev1.Secret
		wantErr string // empty: the pull succeeds
	}{
		{name: "no secret", wantErr: "401 Unauthorized"},
		{name: "secret of another registry", wantErr: "401 Unauthorized",
			secrets: []*corev1.Secret{dockerConfigJSON(t, "other", map[string][2]string{"127.0.0.1:1": right})}},
		{name: "secret of another path", wantErr: "401 Unauthorized",
			secrets: []*corev1.Secret{dockerConfigJSON(t, "other", map[string][2]string{reg.Host + "/other": right})}},
		{name: "wrong password", wantErr: "401 Unauthorized",
			secrets: []*corev1.Secret{dockerConfigJSON(t, "wrong", map[string][2]string{reg.Host: wrong})}},
		{name: "dockerconfigjson",
			secrets: []*corev1.Secret{dockerConfigJSON(t, "right", map[string][2]string{reg.Host: right})}},
		{name: "dockerconfigjson with scheme and path prefix",
			secrets: []*corev1.Secret{dockerConfigJSON(t, "right", map[string][2]string{"http://" + reg.Host + "/team": right})}},
		{name: "dockercfg auth field",
			secrets: []*corev1.Secret{dockercfg(t, "legacy", reg.Host, "puller", "s3cret")}},
		{name: "wildcard host",
			secrets: []*corev1.Secret{dockerConfigJSON(t, "wild", map[string][2]string{"127.0.0.*:" + portOf(reg.Host): right})}},
		{name: "wrong, then right credentials",
			secrets: []*corev1.Secret{
				dockerConfigJSON(t, "wrong", map[string][2]string{reg.Host + "/team": wrong}),
				dockerConfigJSON(t, "right", map[string][2]string{reg.Host: right}),
			}},
		{name: "secret of another type is ignored", wantErr: "401 Unauthorized",
			secrets: []*corev1.Secret{{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newPullRuntime(t, addr, containerd.Config{})
			img, res, err := rt.EnsureImageWith(context.Background(), ref, runtime.PullOptions{Policy: corev1.PullIfNotPresent, Secrets: tt.secrets})
			if tt.wantErr != "" {
				wantPullError(t, err, tt.wantErr)
				t.Logf("error: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkPulled(t, rt, img, res, ref)
		})
	}
}

func portOf(host string) string {
	_, port, _ := strings.Cut(host, ":")
	return port
}

// TestPullPolicies pulls from a registry without auth on plain HTTP on
// 127.0.0.1, with no configuration, through a recording proxy.
func TestPullPolicies(t *testing.T) {
	testregistry.BlockDNS(t)
	addr := runtimetest.StartContainerd(t)
	reg := testregistry.Start(t, "", "")
	proxy, _ := testregistry.StartProxy(t, reg.Host, testregistry.ProxyOptions{})
	src := testregistry.NewImageSource(t)
	src.Push(t, reg, "library/busybox:1.36")
	ref := proxy.Host + "/library/busybox:1.36"
	rt := newPullRuntime(t, addr, containerd.Config{})
	ctx := context.Background()
	ensure := func(policy corev1.PullPolicy) (runtime.Image, runtime.PullResult) {
		t.Helper()
		proxy.Reset()
		img, res, err := rt.EnsureImageWith(ctx, ref, runtime.PullOptions{Policy: policy})
		if err != nil {
			t.Fatalf("%s: %v", policy, err)
		}
		return img, res
	}

	if _, _, err := rt.EnsureImageWith(ctx, ref, runtime.PullOptions{Policy: corev1.PullNever}); !errors.Is(err, runtime.ErrImageNeverPull) {
		t.Fatalf("Never before any pull: %v, want ErrImageNeverPull", err)
	}
	first, res := ensure(corev1.PullIfNotPresent)
	checkPulled(t, rt, first, res, ref)
	if proxy.Count("GET", "/blobs/") == 0 {
		t.Errorf("first pull fetched no blob: %v", proxy.List())
	}

	for _, policy := range []corev1.PullPolicy{corev1.PullIfNotPresent, corev1.PullNever, ""} {
		img, res := ensure(policy)
		if res.Pulled || proxy.Count() != 0 || img.ID != first.ID {
			t.Errorf("%q on a present image: pulled %v, %d requests, ID %s (want %s)", policy, res.Pulled, proxy.Count(), img.ID, first.ID)
		}
	}

	img, res := ensure(corev1.PullAlways)
	if !res.Pulled || proxy.Count("/manifests/1.36") == 0 || img.ID != first.ID {
		t.Errorf("Always, same image: pulled %v, requests %v, ID %s (want %s)", res.Pulled, proxy.List(), img.ID, first.ID)
	}
	if n := proxy.Count("GET", "/blobs/"); n != 0 {
		t.Errorf("Always on an unchanged image fetched %d blobs again", n)
	}

	// The tag moves to another image: IfNotPresent keeps the local one,
	// Always gets the new one.
	moved := src.Push(t, reg, "library/busybox:1.36", "MOVED=1")
	if img, _ := ensure(corev1.PullIfNotPresent); img.ID != first.ID {
		t.Errorf("IfNotPresent after the tag moved: ID %s, want the local %s", img.ID, first.ID)
	}
	img, res = ensure(corev1.PullAlways)
	if !res.Pulled || img.ID == first.ID || img.RepoDigest != proxy.Host+"/library/busybox@"+moved.String() {
		t.Errorf("Always after the tag moved: pulled %v, image %+v, want digest %s", res.Pulled, img, moved)
	}
	if !slices.Contains(img.Config.Env, "MOVED=1") {
		t.Errorf("env of the new image = %v", img.Config.Env)
	}
}

// TestPullWithBearerToken pulls from a registry behind token auth (as
// Docker Hub, GHCR or Harbor): containerd's authorizer trades the secret's
// credentials for a token at the realm the registry names.
func TestPullWithBearerToken(t *testing.T) {
	testregistry.BlockDNS(t)
	addr := runtimetest.StartContainerd(t)
	reg := testregistry.Start(t, "", "")
	proxy, _ := testregistry.StartProxy(t, reg.Host, testregistry.ProxyOptions{TokenUser: "robot", TokenPassword: "t0ken"})
	testregistry.NewImageSource(t).Push(t, reg, "team/busybox:1.36")
	ref := proxy.Host + "/team/busybox:1.36"
	tests := []struct {
		name     string
		password string // empty: no secret
		wantErr  string
	}{
		{name: "no secret", wantErr: "401 Unauthorized"},
		{name: "wrong password", password: "wrong", wantErr: "401 Unauthorized: the registry refused the credentials"},
		{name: "right password", password: "t0ken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newPullRuntime(t, addr, containerd.Config{})
			var secrets []*corev1.Secret
			if tt.password != "" {
				secrets = append(secrets, dockerConfigJSON(t, "token", map[string][2]string{proxy.Host: {"robot", tt.password}}))
			}
			img, res, err := rt.EnsureImageWith(context.Background(), ref, runtime.PullOptions{Policy: corev1.PullAlways, Secrets: secrets})
			if tt.wantErr != "" {
				wantPullError(t, err, tt.wantErr)
				t.Logf("error: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkPulled(t, rt, img, res, ref)
			if proxy.Count("GET", "/token") == 0 {
				t.Errorf("no token was fetched: %v", proxy.List())
			}
		})
	}
}
