package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodelet/nodelet/controlplane/authorization"
	"github.com/nodelet/nodelet/controlplane/bootstraptoken"
	"github.com/nodelet/nodelet/controlplane/pki"
)

// token runs `controlplane token create`: a bootstrap token for joining a
// node, as `kubeadm token create`. It prints the token, then the CA's
// hash for --discovery-token-ca-cert-hash, one per line.
func token(args []string) error {
	if len(args) == 0 || args[0] != "create" {
		return errors.New("usage: controlplane token create --data-dir DIR [--ttl D] [--description TEXT]")
	}
	fs := flag.NewFlagSet("controlplane token create", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "/var/lib/nodelet-controlplane", "the control plane's data directory (holds the CA and the admin kubeconfig)")
	ttl := fs.Duration("ttl", bootstraptoken.DefaultTTL, "how long the token may be used to join (0: forever)")
	description := fs.String("description", "", "a note kept with the token")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	bundle, err := pki.LoadCA(*dataDir)
	if err != nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", bundle.AdminKubeconfigFile)
	if err != nil {
		return fmt.Errorf("load %s: %w", bundle.AdminKubeconfigFile, err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	t := bootstraptoken.Token{TTL: *ttl, Groups: []string{authorization.BootstrapNodeGroup}, Description: *description}
	if *ttl == 0 {
		t.TTL = -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := bootstraptoken.Create(ctx, cs, t, time.Now())
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(os.Stdout, "%s\n%s\n", tok, bootstraptoken.CAHash(bundle.CACert))
	return err
}
