//go:build unix && !linux

package ministack

import "syscall"

// sysProcAttr: its own process group; outside Linux there is no
// parent-death signal, so callers must Stop.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
