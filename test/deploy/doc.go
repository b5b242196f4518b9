// Package deploy checks the deployment files under deploy/ without a cluster,
// a registry or a network: the Kubernetes manifests decoded strictly into
// k8s.io/api's types, deploy/compose.yaml loaded by compose-go (the loader of
// `docker compose config`), and the systemd units verified by
// systemd-analyze. Every command line and every LEDGERQ_* variable they hold
// is checked against the ledgerq binary built from this tree: the flags must
// parse (`ledgerq ARGS --help`) and the settings must pass the binary's own
// validation, up to the point where it dials the database.
//
// It is a module of its own so that k8s.io/api and compose-go stay out of
// ledgerq's go.mod. Run it with `cd test/deploy && go test ./...`
// (.ci/run does); LEDGERQ_BINARY names a ledgerq binary to use instead of
// building one.
package deploy
