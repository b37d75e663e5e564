//go:build unix

package dirlock

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes f's exclusive flock without waiting; busy when another open file holds it.
func tryLock(f *os.File) (busy bool, err error) {
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}
