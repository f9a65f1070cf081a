package apiserver

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// outputKind is what the client asked for in its Accept header.
type outputKind int

const (
	outJSON outputKind = iota
	outYAML
	outTable
	outMetadata // PartialObjectMetadata(List), for metadata informers
	outProtobuf // Kubernetes protobuf, for typed objects (not watch streams)
)

// negotiate picks the first acceptable media type of the Accept header.
// Protobuf is skipped for custom resources (noProtobuf), which have none.
func negotiate(accept string, noProtobuf bool) (outputKind, error) {
	if strings.TrimSpace(accept) == "" {
		return outJSON, nil
	}
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json", "*/*", "application/*":
		case protobufType:
			if params["as"] == "" && !noProtobuf {
				return outProtobuf, nil
			}
			continue
		case "application/yaml":
			if params["as"] == "" {
				return outYAML, nil
			}
			continue
		default:
			continue
		}
		switch {
		case params["as"] == "":
			return outJSON, nil
		case params["g"] != "meta.k8s.io" || params["v"] != "v1":
			continue
		case params["as"] == "Table":
			return outTable, nil
		case params["as"] == "PartialObjectMetadata" || params["as"] == "PartialObjectMetadataList":
			return outMetadata, nil
		}
	}
	return 0, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable,
		Message: "only the following media types are accepted: application/json, application/yaml, application/json;as=Table;v=v1;g=meta.k8s.io",
	}}
}

// writeObject writes obj (an object of res or a list of them) in the form
// the client negotiated.
func (s *Server) writeObject(w http.ResponseWriter, r *http.Request, code int, res *registry.Resource, obj runtime.Object) error {
	kind, err := negotiate(r.Header.Get("Accept"), isUnstructured(res))
	if err != nil {
		return err
	}
	var out any = obj
	switch kind {
	case outTable:
		out, err = s.toTable(res, obj, r.URL.Query().Get("includeObject"), true)
	case outMetadata:
		out, err = toMetadata(obj)
	default:
		setObjectTypeMeta(res, obj)
	}
	if err != nil {
		return err
	}
	if kind == outProtobuf {
		var buf bytes.Buffer
		if err := s.protobuf.Encode(obj, &buf); err != nil {
			return err
		}
		w.Header().Set("Content-Type", protobufType)
		w.WriteHeader(code)
		w.Write(buf.Bytes())
		return nil
	}
	if kind == outYAML {
		data, err := json.Marshal(out)
		if err == nil {
			data, err = yaml.JSONToYAML(data)
		}
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/yaml")
		w.WriteHeader(code)
		w.Write(data)
		return nil
	}
	writeJSON(w, code, out)
	return nil
}

func setObjectTypeMeta(res *registry.Resource, obj runtime.Object) {
	if meta.IsListType(obj) {
		obj.GetObjectKind().SetGroupVersionKind(res.GroupVersion.WithKind(res.ListKind))
		return
	}
	if obj.GetObjectKind().GroupVersionKind().Kind == "" {
		setTypeMeta(res, obj)
	}
}

var defaultColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name must be unique within a namespace."},
	{Name: "Age", Type: "string", Description: "Time since the object was created."},
}

// toTable renders obj (one object or a list) as a meta.k8s.io/v1 Table.
func (s *Server) toTable(res *registry.Resource, obj runtime.Object, includeObject string, headers bool) (*metav1.Table, error) {
	items := []runtime.Object{obj}
	table := &metav1.Table{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "Table"}}
	if meta.IsListType(obj) {
		var err error
		if items, err = meta.ExtractList(obj); err != nil {
			return nil, err
		}
		lm, _ := meta.ListAccessor(obj)
		table.ResourceVersion, table.Continue = lm.GetResourceVersion(), lm.GetContinue()
	} else {
		table.ResourceVersion = accessor(obj).GetResourceVersion()
	}
	if headers {
		table.ColumnDefinitions = res.Columns
		if res.Columns == nil {
			table.ColumnDefinitions = defaultColumns
		}
	}
	now := time.Now()
	table.Rows = make([]metav1.TableRow, 0, len(items))
	for _, item := range items {
		row := metav1.TableRow{}
		if res.Row != nil {
			row.Cells = res.Row(item, now)
		} else {
			m := accessor(item)
			row.Cells = []interface{}{m.GetName(), duration.HumanDuration(now.Sub(m.GetCreationTimestamp().Time))}
		}
		raw, err := rowObject(res, item, includeObject)
		if err != nil {
			return nil, err
		}
		row.Object = raw
		table.Rows = append(table.Rows, row)
	}
	return table, nil
}

func rowObject(res *registry.Resource, obj runtime.Object, includeObject string) (runtime.RawExtension, error) {
	var v any
	switch includeObject {
	case "None":
		return runtime.RawExtension{}, nil
	case "Object":
		setTypeMeta(res, obj)
		v = obj
	default:
		v = partialMetadata(obj)
	}
	data, err := json.Marshal(v)
	return runtime.RawExtension{Raw: data}, err
}

func partialMetadata(obj runtime.Object) *metav1.PartialObjectMetadata {
	om := metav1.ObjectMeta{}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		om = unstructuredMetadata(u)
	} else if a, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if o, ok := a.GetObjectMeta().(*metav1.ObjectMeta); ok {
			om = *o
		}
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: om,
	}
}

func toMetadata(obj runtime.Object) (any, error) {
	if !meta.IsListType(obj) {
		return partialMetadata(obj), nil
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return nil, err
	}
	lm, _ := meta.ListAccessor(obj)
	list := &metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"},
		ListMeta: metav1.ListMeta{ResourceVersion: lm.GetResourceVersion(), Continue: lm.GetContinue()},
		Items:    make([]metav1.PartialObjectMetadata, 0, len(items)),
	}
	for _, item := range items {
		list.Items = append(list.Items, *partialMetadata(item))
	}
	return list, nil
}
