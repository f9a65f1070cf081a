package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// selectorObjects are what FuzzSelectors lists: pods and configmaps in
// two namespaces, and nodes.
var selectorObjects = []struct{ collection, body string }{
	{"/api/v1/namespaces", `{"metadata":{"name":"other"}}`},
	{"/api/v1/namespaces/default/pods", `{"metadata":{"name":"p1","labels":{"app":"web","tier":"front"}},"spec":{"nodeName":"n1","containers":[{"name":"c","image":"i"}]}}`},
	{"/api/v1/namespaces/default/pods", `{"metadata":{"name":"p2","labels":{"app":"db","env":"prod"}},"spec":{"nodeName":"n2","restartPolicy":"Never","schedulerName":"custom","containers":[{"name":"c","image":"i"}]}}`},
	{"/api/v1/namespaces/default/pods", `{"metadata":{"name":"p3"},"spec":{"hostNetwork":true,"containers":[{"name":"c","image":"i"}]}}`},
	{"/api/v1/namespaces/other/pods", `{"metadata":{"name":"p4","labels":{"app":"web","env":""}},"spec":{"nodeName":"n1","restartPolicy":"OnFailure","containers":[{"name":"c","image":"i"}]}}`},
	{"/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"c1","labels":{"a":"b"}}}`},
	{"/api/v1/namespaces/other/configmaps", `{"metadata":{"name":"c2","labels":{"a":"c","b":"x"}}}`},
	{"/api/v1/nodes", `{"metadata":{"name":"n1","labels":{"role":"worker"}}}`},
	{"/api/v1/nodes", `{"metadata":{"name":"n2"},"spec":{"unschedulable":true}}`},
}

// selectorList is a collection FuzzSelectors lists, with upstream's
// field selectors for its kind: the labels its field label conversion
// accepts (renaming some) and the fields of an object.
type selectorList struct {
	path    string
	convert func(label, value string) (string, string, error)
	fields  func(obj map[string]any) fields.Set
}

// upstreamPodFieldLabel is upstream's field label conversion for v1 Pods
// (pkg/apis/core/v1/conversion.go).
func upstreamPodFieldLabel(label, value string) (string, string, error) {
	switch label {
	case "metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
		"spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs",
		"status.nominatedNodeName":
		return label, value, nil
	case "spec.host":
		return "spec.nodeName", value, nil
	}
	return "", "", fmt.Errorf("field label not supported: %s", label)
}

// upstreamFieldLabels is a conversion that accepts the labels given.
func upstreamFieldLabels(supported ...string) func(label, value string) (string, string, error) {
	return func(label, value string) (string, string, error) {
		if slices.Contains(supported, label) {
			return label, value, nil
		}
		return "", "", fmt.Errorf("field label not supported: %s", label)
	}
}

// upstreamPodFields is upstream's ToSelectableFields for pods
// (pkg/registry/core/pod/strategy.go), on the JSON of a v1 Pod.
func upstreamPodFields(obj map[string]any) fields.Set {
	var pod corev1.Pod
	data, _ := json.Marshal(obj)
	_ = json.Unmarshal(data, &pod)
	podIP := ""
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	return fields.Set{
		"metadata.name":            pod.Name,
		"metadata.namespace":       pod.Namespace,
		"spec.nodeName":            pod.Spec.NodeName,
		"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
		"spec.schedulerName":       pod.Spec.SchedulerName,
		"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(pod.Spec.HostNetwork),
		"status.phase":             string(pod.Status.Phase),
		"status.podIP":             podIP,
		"status.nominatedNodeName": pod.Status.NominatedNodeName,
	}
}

func metaFields(obj map[string]any) fields.Set {
	m, _ := obj["metadata"].(map[string]any)
	name, _ := m["name"].(string)
	ns, _ := m["namespace"].(string)
	return fields.Set{"metadata.name": name, "metadata.namespace": ns}
}

var selectorLists = []selectorList{
	{"/api/v1/pods", upstreamPodFieldLabel, upstreamPodFields},
	{"/api/v1/namespaces/default/pods", upstreamPodFieldLabel, upstreamPodFields},
	{"/api/v1/configmaps", upstreamFieldLabels("metadata.name", "metadata.namespace"), metaFields},
	{"/api/v1/namespaces/other/configmaps", upstreamFieldLabels("metadata.name", "metadata.namespace"), metaFields},
	{"/api/v1/nodes", upstreamFieldLabels("metadata.name", "spec.unschedulable"), func(obj map[string]any) fields.Set {
		spec, _ := obj["spec"].(map[string]any)
		unschedulable, _ := spec["unschedulable"].(bool)
		return fields.Set{"metadata.name": metaFields(obj)["metadata.name"], "spec.unschedulable": strconv.FormatBool(unschedulable)}
	}},
}

// objectList is the part of a list answer FuzzSelectors reads.
type objectList struct {
	Metadata metav1.ListMeta `json:"metadata"`
	Items    []map[string]any
}

func itemKey(obj map[string]any) string {
	f := metaFields(obj)
	return f["metadata.namespace"] + "/" + f["metadata.name"]
}

// FuzzSelectors lists pods, configmaps and nodes through the real handler
// with arbitrary label and field selectors, a page at a time when limit
// is set: a selector upstream refuses is a 400, and what a valid one
// lists is what upstream's labels and fields matching select, upstream's
// field label conversion applied, each object once over the pages.
func FuzzSelectors(f *testing.F) {
	for _, s := range []struct {
		list          uint8
		label, fields string
		limit         uint8
	}{
		{0, "app=web", "", 0},
		{0, "app in (web,db),env", "spec.nodeName!=n2", 1},
		{1, "!env,app notin (db)", "spec.hostNetwork=true", 0},
		{0, "env=", "metadata.namespace=other,status.phase=Pending", 2},
		{0, "", "spec.host=n1", 0},
		{0, "", "status.podIPs=", 1},
		{0, "tier=front", "spec.restartPolicy=Always,spec.schedulerName=default-scheduler", 0},
		{2, "a", "metadata.name==c2", 1},
		{3, "a!=b", "metadata.namespace!=default", 0},
		{4, "role", "spec.unschedulable=false", 0},
		{4, "", "metadata.namespace=", 0},
		{0, "app in (web", "", 0},
		{0, "", "spec.nodeName=n1\\,n2", 0},
		{0, "a=b,,", "x=", 0},
		{0, "x>1", "spec.nodeName~n1", 0},
	} {
		f.Add(s.list, s.label, s.fields, s.limit)
	}
	h := newFuzzServer(f).Handler()
	for _, o := range selectorObjects {
		if rec := fuzzServe(h, "POST", o.collection, "application/json", []byte(o.body)); rec.Code != http.StatusCreated {
			f.Fatalf("create in %s: HTTP %d: %s", o.collection, rec.Code, rec.Body.String())
		}
	}
	all := make([][]map[string]any, len(selectorLists))
	for i, l := range selectorLists {
		rec := fuzzServe(h, "GET", l.path, "", nil)
		var list objectList
		if err := json.Unmarshal(rec.Body.Bytes(), &list); rec.Code != http.StatusOK || err != nil {
			f.Fatalf("list %s: HTTP %d (%v): %s", l.path, rec.Code, err, rec.Body.String())
		}
		all[i] = list.Items
	}

	f.Fuzz(func(t *testing.T, which uint8, labelSel, fieldSel string, limit uint8) {
		l := selectorLists[int(which)%len(selectorLists)]
		limit %= 4
		want, refuse := selectorReference(l, all[int(which)%len(selectorLists)], labelSel, fieldSel)
		q := url.Values{}
		if labelSel != "" {
			q.Set("labelSelector", labelSel)
		}
		if fieldSel != "" {
			q.Set("fieldSelector", fieldSel)
		}
		if limit > 0 {
			q.Set("limit", strconv.Itoa(int(limit)))
		}
		what := fmt.Sprintf("%s?%s", l.path, q.Encode())
		var got []string
		for page := 0; ; page++ {
			rec := fuzzServe(h, "GET", l.path+"?"+q.Encode(), "", nil)
			checkRefusal(t, what, rec)
			if refuse != nil {
				if rec.Code != http.StatusBadRequest {
					t.Fatalf("%s: HTTP %d, want 400 (%v): %s", what, rec.Code, refuse, rec.Body.String())
				}
				return
			}
			var list objectList
			if err := json.Unmarshal(rec.Body.Bytes(), &list); rec.Code != http.StatusOK || err != nil {
				t.Fatalf("%s: HTTP %d (%v): %s", what, rec.Code, err, rec.Body.String())
			}
			if limit > 0 && len(list.Items) > int(limit) {
				t.Fatalf("%s: %d items in a page", what, len(list.Items))
			}
			for _, obj := range list.Items {
				got = append(got, itemKey(obj))
			}
			if list.Metadata.Continue == "" {
				break
			}
			if page > len(selectorObjects) {
				t.Fatalf("%s: more pages than objects", what)
			}
			q.Set("continue", list.Metadata.Continue)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: listed %v, upstream selects %v", what, got, want)
		}
	})
}

// selectorReference is what upstream answers a list of objs with the
// selectors given: the keys it selects (sorted), or why it refuses.
func selectorReference(l selectorList, objs []map[string]any, labelSel, fieldSel string) ([]string, error) {
	ls, err := labels.Parse(labelSel)
	if err != nil {
		return nil, err
	}
	fs, err := fields.ParseSelector(fieldSel)
	if err != nil {
		return nil, err
	}
	if fs, err = fs.Transform(l.convert); err != nil {
		return nil, err
	}
	want := []string{}
	for _, obj := range objs {
		m, _ := obj["metadata"].(map[string]any)
		objLabels := labels.Set{}
		if ol, ok := m["labels"].(map[string]any); ok {
			for k, v := range ol {
				objLabels[k], _ = v.(string)
			}
		}
		if ls.Matches(objLabels) && fs.Matches(l.fields(obj)) {
			want = append(want, itemKey(obj))
		}
	}
	slices.Sort(want)
	return want, nil
}
