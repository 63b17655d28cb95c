package builtin

import "errors"

var (
	// ErrOutsideRoot is matched by the errors of read_file and list_dir for
	// a path that is absolute, climbs out with "..", or resolves (through a
	// symlink) outside the configured root.
	ErrOutsideRoot = errors.New("builtin: path outside the root directory")

	// ErrExpression is matched by the calculator's errors for an
	// expression it cannot evaluate (syntax, division by zero, overflow).
	ErrExpression = errors.New("builtin: invalid expression")

	// ErrNoRoot is returned by FileTools when Config.Root is empty.
	ErrNoRoot = errors.New("builtin: no root directory configured")
)
