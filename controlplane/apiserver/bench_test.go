package apiserver

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// BenchmarkAPICreates reports durable creates per second through the
// whole API server (HTTPS, authentication, decoding, defaults, validation,
// bbolt fsync) with 1, 8 and 64 concurrent client-go clients.
func BenchmarkAPICreates(b *testing.B) {
	for _, clients := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			env := newTestEnv(b, storage.HubOptions{}, nil)
			cs := env.clientset(b)
			total := 500 * clients
			if total > 10000 {
				total = 10000
			}
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				for c := 0; c < clients; c++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							n := next.Add(1)
							if n > int64(total)*int64(i+1) {
								return
							}
							_, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), &corev1.ConfigMap{
								ObjectMeta: metav1.ObjectMeta{Name: "cm-" + strconv.FormatInt(n, 10), Labels: map[string]string{"app": "bench"}},
								Data:       map[string]string{"key": "value"}}, metav1.CreateOptions{})
							if err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(total*b.N)/time.Since(start).Seconds(), "creates/s")
		})
	}
}

// BenchmarkAPIWatchLatency reports the delay from the start of a create to
// its arrival on each of 100 and 1,000 HTTPS watch streams (p50, p99),
// with creates paced every 5 ms.
func BenchmarkAPIWatchLatency(b *testing.B) {
	const events = 200
	for _, watchers := range []int{100, 1000} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			var all []time.Duration
			for i := 0; i < b.N; i++ {
				all = append(all, apiWatchRound(b, watchers, events)...)
			}
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

func apiWatchRound(b *testing.B, watchers, events int) []time.Duration {
	env := newTestEnv(b, storage.HubOptions{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Go's HTTP/2 server allows 250 streams per connection: spread the
	// watchers over connections of 100 (a Dial func keeps client-go from
	// sharing one transport).
	var clients []*kubernetes.Clientset
	for c := 0; c < (watchers+99)/100; c++ {
		cfg := *env.config
		d := &net.Dialer{}
		cfg.Dial = d.DialContext
		clients = append(clients, newClientset(b, &cfg))
	}
	sent := make([]atomic.Int64, events)
	lat := make([][]time.Duration, watchers)
	var ready, done sync.WaitGroup
	for w := 0; w < watchers; w++ {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			wi, err := clients[w/100].CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(env.store.Revision(), 10)})
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
				if !isCM {
					continue
				}
				i, _ := strconv.Atoi(cm.Data["i"])
				lat[w] = append(lat[w], time.Duration(time.Now().UnixNano()-sent[i].Load()))
				got++
			}
		}()
	}
	ready.Wait()
	writer := env.clientset(b)
	for i := 0; i < events; i++ {
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
