// Package manifesttest checks deploy/k8s against the official API types
// and against the code: every manifest decodes strictly into its
// Kubernetes (k8s.io/api) or KEDA type, every flag a container passes
// exists on the command of its image and every variable it sets is one
// that command reads, the gateway's Service and probes reach the ports it
// listens on and it connects as the gateway role (pkg/permissions) with
// its tokens and password from Secrets, the gateway runs as its manifest
// says, and the KEDA triggers name the stream, consumers and account
// toolexec really creates, whose lag the NATS monitoring endpoint reports
// as KEDA reads it.
//
// It is a module of its own so that the Kubernetes and KEDA types stay out
// of llmworker's dependencies; .ci/run runs it:
//
//	cd deploy/k8s/manifesttest && go test ./...
package manifesttest
