package storage_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage/value"
	aestransformer "k8s.io/apiserver/pkg/storage/value/encrypt/aes"

	"github.com/nodelet/nodelet/controlplane/storage"
	"github.com/nodelet/nodelet/controlplane/storage/bolt"
)

// prefixed is upstream's shape of a provider list: values carry the
// prefix of the key that wrote them; the first writes.
func prefixed(t *testing.T, keys ...string) value.Transformer {
	t.Helper()
	var list []value.PrefixTransformer
	for _, k := range keys {
		block, err := aes.NewCipher([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		gcm, err := aestransformer.NewGCMTransformer(block)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, value.PrefixTransformer{Prefix: []byte("k8s:enc:aesgcm:v1:" + k[:4] + ":"), Transformer: gcm})
	}
	return value.NewPrefixTransformers(nil, list...)
}

// TestTransforming: secrets are encrypted in the store below and read
// back in plaintext (get, list, watch); other resources are untouched; a
// value read through a key that is not the first is Stale; a value moved
// to another key does not decrypt (the key is authenticated data).
func TestTransforming(t *testing.T) {
	ctx := context.Background()
	raw, err := bolt.Open(bolt.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	secrets := schema.GroupResource{Resource: "secrets"}
	key1, key2 := "key1key1key1key1key1key1key1key1", "key2key2key2key2key2key2key2key2"
	s := storage.NewTransforming(raw, map[schema.GroupResource]value.Transformer{secrets: prefixed(t, key1)})

	w, err := s.Watch(ctx, "/secrets/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	secret := []byte(`{"data":{"password":"c2VjcmV0"}}`)
	if _, err := s.Create(ctx, "/secrets/default/db", secret); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/configmaps/default/c", []byte("plain")); err != nil {
		t.Fatal(err)
	}
	stored, err := raw.Get(ctx, "/secrets/default/db")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(stored.Value, []byte("c2VjcmV0")) || !bytes.HasPrefix(stored.Value, []byte("k8s:enc:aesgcm:v1:key1:")) {
		t.Fatalf("stored secret: %q", stored.Value)
	}
	if cm, _ := raw.Get(ctx, "/configmaps/default/c"); string(cm.Value) != "plain" {
		t.Fatalf("a ConfigMap was transformed: %q", cm.Value)
	}
	if got, err := s.Get(ctx, "/secrets/default/db"); err != nil || !bytes.Equal(got.Value, secret) || got.Stale {
		t.Fatalf("get: %q stale=%v %v", got.Value, got.Stale, err)
	}
	if list, err := s.List(ctx, "/secrets/", storage.ListOptions{}); err != nil || len(list.KVs) != 1 || !bytes.Equal(list.KVs[0].Value, secret) {
		t.Fatalf("list: %+v %v", list, err)
	}
	select {
	case ev := <-w.Events():
		if !bytes.Equal(ev.KV.Value, secret) {
			t.Fatalf("watch event value %q", ev.KV.Value)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event")
	}

	// Rotation: key2 first, key1 still read; what key1 wrote is stale.
	rotated := storage.NewTransforming(raw, map[schema.GroupResource]value.Transformer{secrets: prefixed(t, key2, key1)})
	got, err := rotated.Get(ctx, "/secrets/default/db")
	if err != nil || !bytes.Equal(got.Value, secret) || !got.Stale {
		t.Fatalf("read through the second key: %q stale=%v %v", got.Value, got.Stale, err)
	}
	if _, err := rotated.Update(ctx, "/secrets/default/db", got.Value, got.ModRevision); err != nil {
		t.Fatal(err)
	}
	if again, _ := rotated.Get(ctx, "/secrets/default/db"); again.Stale {
		t.Fatal("still stale after the rewrite")
	}

	// With aesgcm the key is authenticated data: a value moved under
	// another key does not decrypt.
	stored, _ = raw.Get(ctx, "/secrets/default/db")
	if _, err := raw.Create(ctx, "/secrets/default/moved", stored.Value); err != nil {
		t.Fatal(err)
	}
	if _, err := rotated.Get(ctx, "/secrets/default/moved"); err == nil {
		t.Fatal("a value moved to another key decrypted")
	}
}
