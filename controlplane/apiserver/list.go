package apiserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
)

// matcher is a parsed label and field selector.
type matcher struct {
	res    *registry.Resource
	labels labels.Selector
	fields fields.Selector
}

func newMatcher(res *registry.Resource, q url.Values) (*matcher, error) {
	m := &matcher{res: res, labels: labels.Everything(), fields: fields.Everything()}
	if v := q.Get("labelSelector"); v != "" {
		sel, err := labels.Parse(v)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
		}
		m.labels = sel
	}
	if v := q.Get("fieldSelector"); v != "" {
		sel, err := fields.ParseSelector(v)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
		}
		sel, _ = sel.Transform(func(field, value string) (string, string, error) {
			if to, ok := res.FieldAliases[field]; ok {
				return to, value, nil
			}
			return field, value, nil
		})
		supported := fieldSet(res, res.New())
		for _, req := range sel.Requirements() {
			if _, ok := supported[req.Field]; !ok {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
			}
		}
		m.fields = sel
	}
	return m, nil
}

// fieldSet is the set of selectable fields of obj.
func fieldSet(res *registry.Resource, obj runtime.Object) fields.Set {
	set := fields.Set{}
	if res.Fields != nil {
		set = res.Fields(obj)
		if set == nil {
			set = fields.Set{}
		}
	}
	m := accessor(obj)
	set["metadata.name"] = m.GetName()
	if res.Namespaced {
		set["metadata.namespace"] = m.GetNamespace()
	}
	return set
}

func (m *matcher) everything() bool { return m.labels.Empty() && m.fields.Empty() }

func (m *matcher) matches(obj runtime.Object) bool {
	if m.everything() {
		return true
	}
	if !m.labels.Matches(labels.Set(accessor(obj).GetLabels())) {
		return false
	}
	return m.fields.Empty() || m.fields.Matches(fieldSet(m.res, obj))
}

type continueToken struct {
	Rev   int64  `json:"rv"`
	Start string `json:"start"`
}

func (s *Server) serveList(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	q := r.URL.Query()
	items, rev, cont, err := s.list(r.Context(), info, q)
	if err != nil {
		return err
	}
	list := info.Resource.NewList()
	if err := setListItems(list, items, rev, cont); err != nil {
		return err
	}
	return s.writeObject(w, r, http.StatusOK, info.Resource, list)
}

// listMatching lists every object that matches the request's selectors.
func (s *Server) listMatching(ctx context.Context, info requestInfo, q url.Values) ([]runtime.Object, int64, error) {
	q2 := url.Values{}
	for k, v := range q {
		if k != "limit" && k != "continue" {
			q2[k] = v
		}
	}
	items, rev, _, err := s.list(ctx, info, q2)
	return items, rev, err
}

// list serves one page. Pages after the first ask the store for the
// first's revision: etcd serves that snapshot (410 Expired once it is
// compacted, with a token that continues at the latest, as upstream's);
// bbolt keeps no MVCC history and reads the current state, so items may
// be newer than the list's resourceVersion, which a watch from that
// version then replays: a client that lists and watches still converges.
func (s *Server) list(ctx context.Context, info requestInfo, q url.Values) ([]runtime.Object, int64, string, error) {
	res := info.Resource
	match, err := newMatcher(res, q)
	if err != nil {
		return nil, 0, "", err
	}
	rvParam := q.Get("resourceVersion")
	if err := s.checkListRV(rvParam, q.Get("resourceVersionMatch")); err != nil {
		return nil, 0, "", err
	}
	limit := 0
	if v := q.Get("limit"); v != "" && rvParam != "0" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 0 {
			return nil, 0, "", apierrors.NewBadRequest(fmt.Sprintf("invalid limit %q", v))
		}
	}
	prefix := listPrefix(res, info.Namespace)
	opts := storage.ListOptions{}
	var firstRev int64
	if c := q.Get("continue"); c != "" {
		tok, err := decodeContinue(c, prefix)
		if err != nil {
			return nil, 0, "", err
		}
		// A negative revision continues at the latest, as upstream's
		// (its tokens carry one when the first page's is compacted).
		opts.StartKey, firstRev = tok.Start, max(tok.Rev, 0)
		opts.Revision = firstRev
	}
	start := opts.StartKey // where this request's items begin
	var items []runtime.Object
	for {
		if limit > 0 {
			opts.Limit = max(limit-len(items), 256)
		}
		page, err := s.store.List(ctx, prefix, opts)
		if errors.Is(err, storage.ErrCompacted) {
			return nil, 0, "", continueExpired(start)
		}
		if err != nil {
			return nil, 0, "", err
		}
		if firstRev == 0 {
			firstRev = page.Revision
		}
		opts.Revision = firstRev
		for i, kv := range page.KVs {
			obj, err := s.codec.decode(res, kv)
			if err != nil {
				return nil, 0, "", err
			}
			if !match.matches(obj) {
				continue
			}
			items = append(items, obj)
			if limit > 0 && len(items) == limit && (i < len(page.KVs)-1 || page.More) {
				return items, firstRev, encodeContinue(firstRev, kv.Key+"\x00"), nil
			}
		}
		if !page.More {
			return items, firstRev, "", nil
		}
		opts.StartKey = page.KVs[len(page.KVs)-1].Key + "\x00"
	}
}

func (s *Server) checkListRV(rv, match string) error {
	n, err := parseRV(rv)
	if err != nil {
		return err
	}
	cur := s.store.Revision()
	switch match {
	case "", string(metav1.ResourceVersionMatchNotOlderThan):
	case string(metav1.ResourceVersionMatchExact):
		if n != cur && n != 0 {
			return apierrors.NewResourceExpired(fmt.Sprintf("resourceVersion %d is not available for exact reads; the current one is %d", n, cur))
		}
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersionMatch %q", match))
	}
	if n > cur {
		return tooLargeRV(n, cur)
	}
	return nil
}

func tooLargeRV(want, cur int64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", want, cur), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// continueExpired is upstream's answer to a continue token whose revision
// is compacted: 410 Expired, carrying a token that continues from the same
// key at the latest revision (an inconsistent list, as the message says).
func continueExpired(start string) error {
	err := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. " +
		"Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
	err.ErrStatus.ListMeta.Continue = encodeContinue(-1, start)
	return err
}

func encodeContinue(rev int64, start string) string {
	data, _ := json.Marshal(continueToken{Rev: rev, Start: start})
	return base64.RawURLEncoding.EncodeToString(data)
}

func decodeContinue(s, prefix string) (continueToken, error) {
	var tok continueToken
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(data, &tok)
	}
	if err != nil || len(tok.Start) < len(prefix) || tok.Start[:len(prefix)] != prefix {
		return tok, apierrors.NewBadRequest("invalid continue token")
	}
	return tok, nil
}

// setListItems fills a typed list.
func setListItems(list runtime.Object, items []runtime.Object, rev int64, cont string) error {
	if err := meta.SetList(list, items); err != nil {
		return err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return err
	}
	lm.SetResourceVersion(strconv.FormatInt(rev, 10))
	lm.SetContinue(cont)
	return nil
}
