package authorization_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/controlplane/admissionplugins"
	"github.com/nodelet/nodelet/controlplane/apiserver"
	"github.com/nodelet/nodelet/controlplane/apivalidation"
	"github.com/nodelet/nodelet/controlplane/authorization"
	"github.com/nodelet/nodelet/controlplane/controlplanetest"
)

// accessEnv is a test API server and a client of user "bench", who may
// create, list and watch ConfigMaps in default. With access control on it
// decides as the control plane does (Node,RBAC behind system:masters from
// a loopback informer factory, the bootstrap policy reconciled, the
// escalation check and upstream's admission chain); off, every
// authenticated user may do everything and nothing is admitted.
type accessEnv struct {
	srv   *controlplanetest.Server
	bench *rest.Config
}

func newAccessEnv(b *testing.B, on bool) *accessEnv {
	b.Helper()
	// Upstream's informers and plugins log through klog, whose lines would
	// break the benchmark's result lines.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	var opts controlplanetest.Options
	var authz *authorization.Authorizer
	var factory informers.SharedInformerFactory
	var loop kubernetes.Interface
	if on {
		setup := func(tb testing.TB, loopback *rest.Config) {
			if factory != nil {
				return
			}
			cs, err := kubernetes.NewForConfig(loopback)
			if err != nil {
				tb.Fatal(err)
			}
			loop, factory = cs, informers.NewSharedInformerFactory(cs, 0)
			if authz, err = authorization.New(factory); err != nil {
				tb.Fatal(err)
			}
		}
		opts.Admission = func(tb testing.TB, loopback *rest.Config) []apiserver.Admission {
			setup(tb, loopback)
			dyn, err := dynamic.NewForConfig(loopback)
			if err != nil {
				tb.Fatal(err)
			}
			chain, err := admissionplugins.New(admissionplugins.Config{Validator: apivalidation.New(), Client: loop, Dynamic: dyn,
				Informers: factory, Authorizer: authz, Stop: ctx.Done()})
			if err != nil {
				tb.Fatal(err)
			}
			return []apiserver.Admission{authz.Escalation(), chain}
		}
		opts.Authz = func(tb testing.TB, loopback *rest.Config) authorizer.Authorizer {
			setup(tb, loopback)
			return authz
		}
	}
	srv := controlplanetest.Start(b, opts)
	b.Cleanup(func() {
		cancel()
		if factory != nil {
			factory.Shutdown()
		}
	})
	admin := srv.Clientset(b)
	if on {
		factory.Start(ctx.Done())
		boot := authorization.NewBootstrapper(loop, authorization.DefaultPolicy(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err := boot.Run(ctx); err != nil {
			b.Fatal(err)
		}
		for authz.Synced() != nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "list", "watch"}}}
	if _, err := admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "bench"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "bench"}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	e := &accessEnv{srv: srv, bench: srv.UserConfig(b, "bench")}
	// The binding reaches the authorizer through its informer.
	cs := e.client(b)
	for {
		_, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return e
}

// client is a clientset of the bench user on a connection of its own.
func (e *accessEnv) client(b *testing.B) kubernetes.Interface {
	cfg := rest.CopyConfig(e.bench)
	cfg.Dial = (&net.Dialer{}).DialContext
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

// BenchmarkAccessCreates: durable ConfigMap creates per second by a user
// RBAC authorizes, with access control off and on (issue 21's target: on
// within 15% of off).
func BenchmarkAccessCreates(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		for _, clients := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("access=%s/clients=%d", mode, clients), func(b *testing.B) {
				e := newAccessEnv(b, mode == "on")
				cs := e.client(b)
				total := min(500*clients, 10000)
				var next atomic.Int64
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					var wg sync.WaitGroup
					for range clients {
						wg.Go(func() {
							for {
								n := next.Add(1)
								if n > int64(total)*int64(i+1) {
									return
								}
								_, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), &corev1.ConfigMap{
									ObjectMeta: metav1.ObjectMeta{Name: "cm-" + strconv.FormatInt(n, 10)},
									Data:       map[string]string{"key": "value"}}, metav1.CreateOptions{})
								if err != nil {
									b.Error(err)
									return
								}
							}
						})
					}
					wg.Wait()
				}
				b.ReportMetric(float64(total*b.N)/time.Since(start).Seconds(), "creates/s")
			})
		}
	}
}

// BenchmarkAccessWatchLatency: from the start of a create to its arrival
// on each of N watch streams of the bench user (p50, p99), creates paced
// every 5 ms, access control off and on.
func BenchmarkAccessWatchLatency(b *testing.B) {
	const events = 200
	for _, mode := range []string{"off", "on"} {
		for _, watchers := range []int{100, 1000} {
			b.Run(fmt.Sprintf("access=%s/watchers=%d", mode, watchers), func(b *testing.B) {
				var all []time.Duration
				for i := 0; i < b.N; i++ {
					all = append(all, watchRound(b, newAccessEnv(b, mode == "on"), watchers, events)...)
				}
				sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
				b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
			})
		}
	}
}

func watchRound(b *testing.B, e *accessEnv, watchers, events int) []time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// 100 streams per connection (Go's HTTP/2 server allows 250).
	var clients []kubernetes.Interface
	for range (watchers + 99) / 100 {
		clients = append(clients, e.client(b))
	}
	sent := make([]atomic.Int64, events)
	lat := make([][]time.Duration, watchers)
	var ready, done sync.WaitGroup
	for w := range watchers {
		ready.Add(1)
		done.Go(func() {
			wi, err := clients[w/100].CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
			ready.Done()
			if err != nil {
				b.Error(err)
				return
			}
			defer wi.Stop()
			for got := 0; got < events; {
				ev, ok := <-wi.ResultChan()
				if !ok {
					b.Errorf("watch closed")
					return
				}
				cm, isCM := ev.Object.(*corev1.ConfigMap)
				if !isCM || cm.Data["i"] == "" {
					continue
				}
				i, _ := strconv.Atoi(cm.Data["i"])
				lat[w] = append(lat[w], time.Duration(time.Now().UnixNano()-sent[i].Load()))
				got++
			}
		})
	}
	ready.Wait()
	writer := e.client(b)
	for i := range events {
		sent[i].Store(time.Now().UnixNano())
		_, err := writer.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%04d", i)}, Data: map[string]string{"i": strconv.Itoa(i)}}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	done.Wait()
	var out []time.Duration
	for _, l := range lat {
		out = append(out, l...)
	}
	return out
}
