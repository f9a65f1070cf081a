package nodeipam

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/test/testkit"
)

// startController runs a controller with its own informer factory until the
// returned stop function is called.
func startController(t *testing.T, cs kubernetes.Interface, cidr string) (stop func()) {
	t.Helper()
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "nodeipam"})
	f := informers.NewSharedInformerFactory(cs, 0)
	c, err := New(Config{Client: cs, Informers: f, Recorder: rec, ClusterCIDR: cidr, NodeMaskSize: 24,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 2) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		f.Shutdown()
		b.Shutdown()
	}
}

func createNode(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	_, err := cs.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func waitCIDR(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	var cidr string
	testkit.Eventually(t, 10*time.Second, "a CIDR for node "+name, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(n.Spec.PodCIDRs) == 1 && n.Spec.PodCIDR == n.Spec.PodCIDRs[0] {
			cidr = n.Spec.PodCIDR
			return true, nil
		}
		return false, nil
	})
	return cidr
}

func TestNodesGetDistinctCIDRsReusedAfterDeleteAndKeptOverRestart(t *testing.T) {
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	cs := srv.Clientset(t)
	ctx := context.Background()
	// Four /24s: enough to see reuse after the round-robin wraps.
	stop := startController(t, cs, "10.244.0.0/22")

	got := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		createNode(t, cs, n)
		got[n] = waitCIDR(t, cs, n)
	}
	if got["a"] == got["b"] || got["b"] == got["c"] || got["a"] == got["c"] {
		t.Fatalf("CIDRs not distinct: %v", got)
	}

	// Restart: the new controller must rebuild a, b, c from the nodes and
	// hand d the one free subnet, not 10.244.0.0/24 again.
	stop()
	stop = startController(t, cs, "10.244.0.0/22")
	defer func() { stop() }()
	createNode(t, cs, "d")
	got["d"] = waitCIDR(t, cs, "d")
	for _, n := range []string{"a", "b", "c"} {
		if got["d"] == got[n] {
			t.Fatalf("restarted controller reused %s's CIDR %s", n, got[n])
		}
	}

	// Full: e waits with CIDRNotAvailable and NetworkUnavailable.
	createNode(t, cs, "e")
	testkit.Eventually(t, 10*time.Second, "NetworkUnavailable on e", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "e", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := findCondition(n.Status.Conditions, corev1.NodeNetworkUnavailable)
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == ReasonCIDRNotAvailable, nil
	})
	waitEvent(t, cs, "e", ReasonCIDRNotAvailable)

	// Deleting b frees its CIDR; e (retrying) gets it and its condition clears.
	if err := cs.CoreV1().Nodes().Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if e := waitCIDR(t, cs, "e"); e != got["b"] {
		t.Fatalf("e got %s, want b's released %s", e, got["b"])
	}
	testkit.Eventually(t, 10*time.Second, "NetworkUnavailable cleared on e", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "e", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := findCondition(n.Status.Conditions, corev1.NodeNetworkUnavailable)
		return c != nil && c.Status == corev1.ConditionFalse, nil
	})
}

func waitEvent(t *testing.T, cs kubernetes.Interface, node, reason string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "a "+reason+" event for node "+node, func(ctx context.Context) (bool, error) {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == node && e.Reason == reason {
				return true, nil
			}
		}
		return false, nil
	})
}
