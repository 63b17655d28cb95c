// Package cmdutil is the plumbing the thin service mains (cmd/ingest,
// cmd/turn, cmd/toolexec, cmd/hookbridge) share, so that every service
// reads its flags, environment, logs and signals the same way (the
// "Service lifecycle contract" of the team brief).
//
// # Flags and environment
//
// Every flag has an environment default. [Env], [EnvInt] and
// [EnvDuration] read one variable through an injectable getenv (tests pass
// a map instead of os.Getenv); a malformed number is an error naming the
// variable. [Common] registers the flags all NATS services share:
// --nats-url, --nats-creds, --prefix, --instance, --store-dir and the
// [LogFlags] --log-format and --log-level. [Parse] parses and refuses
// positional arguments.
//
// # Logs
//
// [NewLogger] builds the slog logger from a format (json or text) and a
// level (debug, info, warn, error).
//
// # Lifecycle
//
// [Main] runs a command with a context that SIGINT and SIGTERM cancel and
// exits with its code. [Common.Connect] connects through internal/natsutil
// (an embedded server when no URL is configured) and logs the embedded
// server's URL. [Drain] waits for the signal, logs the shutdown and stops
// the service within the drain timeout; [StopWithin] is the bounded stop
// alone.
package cmdutil
