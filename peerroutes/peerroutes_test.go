package peerroutes

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/network"
)

func testNode(name, ip string, cidrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: cidrs}}
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
	}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	return n
}

func TestPeersOf(t *testing.T) {
	legacy := testNode("n4", "10.240.0.14")
	legacy.Spec.PodCIDR = "10.244.4.0/24" // spec.podCIDRs unset, as older writers leave it
	got := peersOf([]*corev1.Node{
		testNode("n3", "10.240.0.13", "10.244.3.0/24"),
		testNode("self", "10.240.0.11", "10.244.1.0/24"),
		testNode("n2", "10.240.0.12", "10.244.2.0/24"),
		testNode("no-ip", "", "10.244.5.0/24"),
		testNode("no-cidr", "10.240.0.16"),
		legacy,
	}, "self")
	want := []network.Peer{
		{Name: "n2", IP: netip.MustParseAddr("10.240.0.12"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")}},
		{Name: "n3", IP: netip.MustParseAddr("10.240.0.13"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.3.0/24")}},
		{Name: "n4", IP: netip.MustParseAddr("10.240.0.14"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.4.0/24")}},
	}
	if !samePeers(got, want) {
		t.Errorf("peersOf = %v, want %v", got, want)
	}
}

type recordingSyncer struct {
	mu    sync.Mutex
	calls [][]network.Peer
}

func (r *recordingSyncer) Sync(_ context.Context, peers []network.Peer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, peers)
	return nil
}

func (r *recordingSyncer) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// TestSyncPeerRoutes: one Sync at start, one per kick, with the current
// peers.
func TestSyncPeerRoutes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	nodes := []*corev1.Node{testNode("self", "10.240.0.11", "10.244.1.0/24")}
	list := func() []*corev1.Node { mu.Lock(); defer mu.Unlock(); return nodes }
	kick := make(chan struct{}, 1)
	rec := &recordingSyncer{}
	done := make(chan struct{})
	go func() { syncPeerRoutes(ctx, rec, list, "self", kick, slog.Default()); close(done) }()
	waitFor := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); rec.count() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d syncs, want %d", rec.count(), n)
			}
		}
	}
	waitFor(1)
	mu.Lock()
	nodes = append(nodes, testNode("n2", "10.240.0.12", "10.244.2.0/24"))
	mu.Unlock()
	kick <- struct{}{}
	waitFor(2)
	cancel()
	<-done
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.calls[0]) != 0 || len(rec.calls[1]) != 1 || rec.calls[1][0].Name != "n2" {
		t.Errorf("syncs %v", rec.calls)
	}
}
