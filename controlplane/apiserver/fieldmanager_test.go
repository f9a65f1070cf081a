package apiserver

import (
	"encoding/json"
	goruntime "runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodelet/nodelet/controlplane/openapi"
	"github.com/nodelet/nodelet/controlplane/registry"
)

func testFieldManagers(tb testing.TB) (*fieldManagers, map[schema.GroupResource]*registry.Resource) {
	resources := registry.All()
	set := openapi.NewSet()
	openapi.AddBuiltins(set, resources, "v1.37.2")
	byGR := map[schema.GroupResource]*registry.Resource{}
	for _, r := range resources {
		byGR[schema.GroupResource{Group: r.GroupVersion.Group, Resource: r.Name}] = r
	}
	return newFieldManagers(set, resources), byGR
}

func heapInUse() uint64 {
	goruntime.GC()
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkTypeConverter reports what the first write of a group-version
// that needs field management costs a server no client asked for OpenAPI
// yet: building the group-version's document (MB-doc counts upstream's
// definitions too, which the openapi package drops 30 s after its last build),
// then the type converter and a first use of it (a Pod or Deployment
// create), in time and in heap kept (the converter's: what forgetting
// it gives back; all 16 built-in group-versions' together keep 0.8 MB).
func BenchmarkTypeConverter(b *testing.B) {
	for _, c := range []struct{ gv, group, resource string }{{"api/v1", "", "pods"}, {"apis/apps/v1", "apps", "deployments"}} {
		b.Run(c.gv, func(b *testing.B) {
			var docTook, convTook time.Duration
			var docKept, convKept uint64
			for i := 0; i < b.N; i++ {
				f, byGR := testFieldManagers(b)
				res := byGR[schema.GroupResource{Group: c.group, Resource: c.resource}]
				before := heapInUse()
				start := time.Now()
				if _, err := f.docs.Document(c.gv); err != nil {
					b.Fatal(err)
				}
				docTook += time.Since(start)
				mid := heapInUse()
				docKept += mid - before
				start = time.Now()
				fm, err := f.forResource(res, "")
				if err != nil {
					b.Fatal(err)
				}
				live, obj := res.New(), res.New()
				setTypeMeta(res, live)
				setTypeMeta(res, obj)
				accessor(obj).SetName("x")
				fm.UpdateNoErrors(live, obj, "bench")
				convTook += time.Since(start)
				with := heapInUse()
				f.forget(c.gv)
				convKept += with - heapInUse()
				goruntime.KeepAlive(f)
			}
			n := float64(b.N)
			b.ReportMetric(float64(docTook.Milliseconds())/n, "ms-doc")
			b.ReportMetric(float64(docKept)/n/(1<<20), "MB-doc")
			b.ReportMetric(float64(convTook.Milliseconds())/n, "ms-converter")
			b.ReportMetric(float64(convKept)/n/(1<<20), "MB-converter")
		})
	}
}

// BenchmarkManagedFieldsCreate is the field manager's work on one create
// of the ConfigMap BenchmarkAPICreates writes and of a Deployment, and
// what the entry adds to the stored JSON.
func BenchmarkManagedFieldsCreate(b *testing.B) {
	f, byGR := testFieldManagers(b)
	for _, c := range []struct {
		gr  schema.GroupResource
		obj func() runtime.Object
	}{
		{schema.GroupResource{Resource: "configmaps"}, func() runtime.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default", Labels: map[string]string{"app": "bench"}},
				Data: map[string]string{"key": "value"}}
		}},
		{schema.GroupResource{Group: "apps", Resource: "deployments"}, func() runtime.Object { return testDeployment("web") }},
	} {
		b.Run(c.gr.String(), func(b *testing.B) {
			res := byGR[c.gr]
			fm, err := f.forResource(res, "")
			if err != nil {
				b.Fatal(err)
			}
			var added int
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				live, obj := res.New(), c.obj()
				setTypeMeta(res, live)
				setTypeMeta(res, obj)
				out := fm.UpdateNoErrors(live, obj, "bench")
				if i == 0 {
					b.StopTimer()
					with, _ := json.Marshal(out)
					accessor(out).SetManagedFields(nil)
					without, _ := json.Marshal(out)
					added = len(with) - len(without)
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(added), "stored-bytes-added")
		})
	}
}
