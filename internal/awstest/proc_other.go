//go:build !linux

package awstest

import "syscall"

// sysProcAttr: outside Linux there is no parent-death signal; Main stops the
// emulator when the tests end normally.
func sysProcAttr() *syscall.SysProcAttr { return nil }
