package provision

import "errors"

// ErrFailed is returned by Provision when a stream or bucket cannot be
// created or updated (e.g. it exists with an incompatible configuration
// such as another retention policy).
var ErrFailed = errors.New("provision: failed")

// ErrPrefixConflict is returned by Provision when a stream exists with the
// subjects of another prefix: it belongs to another installation on the
// same NATS account, which updating it would break (stream and bucket
// names are per account, not per prefix). Run the second installation in
// its own account, or with the same prefix.
var ErrPrefixConflict = errors.New("provision: the streams belong to an installation with another prefix")

// ErrNotProvisioned is returned by Provision with Options.VerifyOnly when
// a stream or bucket does not exist: run `llmworker provision` (with an
// identity that may create streams) first.
var ErrNotProvisioned = errors.New("provision: not provisioned (run llmworker provision first)")
