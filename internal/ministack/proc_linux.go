//go:build linux

package ministack

import "syscall"

// sysProcAttr puts the emulator in its own process group (Stop ends its
// Lambdas with it) and makes the kernel send it SIGTERM when the process
// that started it dies without calling Stop (a panic, a test timeout, a
// kill), so no emulator outlives its user.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
