// Package service assembles llmworker's services once, for both ways of
// running them: as their own command (cmd/ingest, cmd/turn, cmd/toolexec,
// cmd/hookbridge, each a shim around Main) and together in one process
// (`llmworker up --services …`, internal/cli). A Service registers its
// flags (each with its environment variable and help text) through Flags
// and starts on a connection; Main adds the flags every service shares
// (NATS, prefix, instance, logging, drain, replicas), connects, runs the
// service until its context ends and drains it.
//
// Each service lives in a package of its own (ingestsvc, turnsvc,
// toolexecsvc, hookbridgesvc), so that a command links only its service:
// cmd/turn does not link the provider SDKs that ingestsvc brings in.
//
// # One rule for numbers
//
// For every duration and count a service takes, zero means the documented
// default and a negative value means off (no limit, no retries), on the
// command line as in the Config structs of the service packages.
package service
