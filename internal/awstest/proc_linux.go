//go:build linux

package awstest

import "syscall"

// sysProcAttr makes the kernel send the emulator SIGTERM when the test binary
// dies without running Stop (a panic, a timeout, a kill), so no emulator
// outlives its tests.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
