package endpoints

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/test/testkit"
)

func startController(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "endpoint-controller"})
	f := informers.NewSharedInformerFactory(cs, 0)
	c, err := New(Config{Client: cs, Informers: f, Recorder: rec,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 2) }()
	t.Cleanup(func() {
		cancel()
		<-done
		f.Shutdown()
		b.Shutdown()
	})
}

// makePod creates a pod on node1 and sets its IP and readiness as a node
// agent would; ip "" leaves the status alone.
func makePod(t *testing.T, cs kubernetes.Interface, name, ip string, isReady bool) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "c", Image: "nginx",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
	}
	created, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip != "" {
		setPodStatus(t, cs, created, ip, isReady)
	}
}

func setPodStatus(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod, ip string, isReady bool) {
	t.Helper()
	status := corev1.ConditionFalse
	if isReady {
		status = corev1.ConditionTrue
	}
	pod = pod.DeepCopy()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if _, err := cs.CoreV1().Pods("default").UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func endpointsSummary(cs kubernetes.Interface, name string) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		ep, err := cs.CoreV1().Endpoints("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return summary(ep.Subsets), nil
	}
}

func waitEndpoints(t *testing.T, cs kubernetes.Interface, name, want string) {
	t.Helper()
	get := endpointsSummary(cs, name)
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("endpoints %s to be %q", name, want), func(ctx context.Context) (bool, error) {
		s, err := get(ctx)
		if err != nil || s == want {
			return err == nil, err
		}
		return false, fmt.Errorf("got %q", s)
	})
}

// sliceEndpoints returns the managed slices' endpoints by pod name.
func sliceEndpoints(ctx context.Context, cs kubernetes.Interface, svc string) ([]discoveryv1.EndpointSlice, map[string]discoveryv1.Endpoint, error) {
	list, err := cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + svc + "," + discoveryv1.LabelManagedBy + "=" + ManagedBy})
	if err != nil {
		return nil, nil, err
	}
	eps := map[string]discoveryv1.Endpoint{}
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			eps[ep.TargetRef.Name] = ep
		}
	}
	return list.Items, eps, nil
}

func TestEndpointsAndSlicesFollowPods(t *testing.T) {
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	cs := srv.Clientset(t)
	ctx := context.Background()
	startController(t, cs)

	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"tier": "front"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	makePod(t, cs, "ready", "10.244.1.2", true)
	makePod(t, cs, "unready", "10.244.1.3", false)
	makePod(t, cs, "noip", "", false)
	waitEndpoints(t, cs, "web", "[http:8080/TCP r=10.244.1.2 nr=10.244.1.3 ]")

	testkit.Eventually(t, 10*time.Second, "slices", func(ctx context.Context) (bool, error) {
		slices, eps, err := sliceEndpoints(ctx, cs, "web")
		if err != nil || len(slices) != 1 || len(eps) != 2 {
			return false, err
		}
		s := slices[0]
		if s.AddressType != discoveryv1.AddressTypeIPv4 || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != svc.UID ||
			s.Labels["tier"] != "front" || *s.Ports[0].Port != 8080 || s.GenerateName != "web-" {
			t.Fatalf("slice %+v", s)
		}
		r, u := eps["ready"], eps["unready"]
		return *r.Conditions.Ready && *r.Conditions.Serving && !*u.Conditions.Ready && deref(r.NodeName) == "node1", nil
	})

	// The unready pod gets ready; the pod without an IP gets one.
	pod, _ := cs.CoreV1().Pods("default").Get(ctx, "unready", metav1.GetOptions{})
	setPodStatus(t, cs, pod, "10.244.1.3", true)
	pod, _ = cs.CoreV1().Pods("default").Get(ctx, "noip", metav1.GetOptions{})
	setPodStatus(t, cs, pod, "10.244.1.4", false)
	waitEndpoints(t, cs, "web", "[http:8080/TCP r=10.244.1.2 10.244.1.3 nr=10.244.1.4 ]")

	// A terminating pod (bound pods are deleted gracefully) leaves the
	// Endpoints but stays in the slice as terminating.
	if err := cs.CoreV1().Pods("default").Delete(ctx, "ready", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, cs, "web", "[http:8080/TCP r=10.244.1.3 nr=10.244.1.4 ]")
	testkit.Eventually(t, 10*time.Second, "terminating endpoint", func(ctx context.Context) (bool, error) {
		_, eps, err := sliceEndpoints(ctx, cs, "web")
		ep, ok := eps["ready"]
		return err == nil && ok && *ep.Conditions.Terminating && !*ep.Conditions.Ready && *ep.Conditions.Serving, nil
	})

	// Nothing changed: no writes.
	ep, _ := cs.CoreV1().Endpoints("default").Get(ctx, "web", metav1.GetOptions{})
	slices, _, _ := sliceEndpoints(ctx, cs, "web")
	pod, _ = cs.CoreV1().Pods("default").Get(ctx, "noip", metav1.GetOptions{})
	pod.Annotations = map[string]string{"touched": "yes"}
	if _, err := cs.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	ep2, _ := cs.CoreV1().Endpoints("default").Get(ctx, "web", metav1.GetOptions{})
	slices2, _, _ := sliceEndpoints(ctx, cs, "web")
	if ep2.ResourceVersion != ep.ResourceVersion || len(slices2) != 1 || slices2[0].ResourceVersion != slices[0].ResourceVersion {
		t.Fatalf("no-op pod update rewrote endpoints: %s->%s", ep.ResourceVersion, ep2.ResourceVersion)
	}

	// Deleting the Service deletes its Endpoints.
	if err := cs.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "endpoints gone", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Endpoints("default").Get(ctx, "web", metav1.GetOptions{})
		return err != nil, nil
	})
}

func TestSelectorlessServiceLeftAlone(t *testing.T) {
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	cs := srv.Clientset(t)
	ctx := context.Background()
	startController(t, cs)
	_, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	manual := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1"}}, Ports: []corev1.EndpointPort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}}
	if _, err := cs.CoreV1().Endpoints("default").Create(ctx, manual, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A selector Service created afterwards is handled, which shows the
	// controller is running while it ignores "ext".
	if _, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	makePod(t, cs, "p", "10.244.1.9", true)
	waitEndpoints(t, cs, "web", "[:80/TCP r=10.244.1.9 nr=]")
	waitEndpoints(t, cs, "ext", "[:80/TCP r=192.0.2.1 nr=]")
	_, eps, err := sliceEndpoints(ctx, cs, "ext")
	if err != nil || len(eps) != 0 {
		t.Fatalf("slices for selectorless service: %v %v", eps, err)
	}
}
