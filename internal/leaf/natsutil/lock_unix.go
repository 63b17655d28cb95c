//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package natsutil

import (
	"os"
	"syscall"
)

// tryLock takes an advisory lock on f without waiting; the kernel drops it
// when the process ends, so a crash leaves no stale lock.
func tryLock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
