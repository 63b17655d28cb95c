package cmdutil

import "errors"

// ErrUsage is matched by the errors of [Parse] (positional arguments) and
// [NewLogger] (unknown format or level): the command line is wrong, which
// the mains report with exit code 2. Errors of [EnvInt] and [EnvDuration]
// wrap the strconv/time parse error instead, naming the variable.
var ErrUsage = errors.New("usage")

// usageError carries a message of its own and matches ErrUsage, so the
// text the mains print stays exactly the message.
type usageError struct {
	msg string
	err error
}

func (e *usageError) Error() string { return e.msg }

func (e *usageError) Is(target error) bool { return target == ErrUsage }

func (e *usageError) Unwrap() error { return e.err }
