//go:build !unix

package hookbridge

import "os/exec"

// setProcessGroup: without process groups only the command itself is
// killed on a timeout (exec.CommandContext's default).
func setProcessGroup(cmd *exec.Cmd) {}
