package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Memory is measured from /proc (Linux only): the resident set of every
// process a server start made (the launcher and all its descendants), sampled,
// and of the process that listens on the server's port with its descendants
// (the "server" figure, which leaves out launchers such as the JS CLI's
// watcher process). A server's database started beside it (Aegra's
// PostgreSQL: the postmaster and its backends) is added to both figures.

var pageKB = int64(os.Getpagesize() / 1024)

// rssKB is a process's resident set in kB from /proc/<pid>/statm, 0 when the
// process is gone.
func rssKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n * pageKB
}

// statusKB reads one "Name:   123 kB" field of /proc/<pid>/status.
func statusKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	return parseStatusKB(b, field)
}

func parseStatusKB(status []byte, field string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, field+":") {
			continue
		}
		f := strings.Fields(line[len(field)+1:])
		if len(f) == 0 {
			return 0
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		return n
	}
	return 0
}

// parentOf is the parent pid from /proc/<pid>/stat, -1 when unreadable.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	return parseStatPPID(b)
}

// parseStatPPID reads field 4 of a stat line; the command (field 2) is in
// parentheses and may hold spaces and parentheses itself.
func parseStatPPID(stat []byte) int {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return -1
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return n
}

// descendants is root and every process below it.
func descendants(root int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return []int{root}
	}
	children := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := parentOf(pid); pp > 0 {
			children[pp] = append(children[pp], pid)
		}
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// listeningPID finds the process among pids that has a listening TCP socket
// on 127.0.0.1:port, 0 when none does.
func listeningPID(pids []int, port int) int {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, ino := range parseListenInodes(b, port) {
			inodes[ino] = true
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	for _, pid := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(dir, fd.Name()))
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			if inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
				return pid
			}
		}
	}
	return 0
}

// parseListenInodes returns the socket inodes of /proc/net/tcp lines in state
// LISTEN (0A) on the given local port.
func parseListenInodes(table []byte, port int) []string {
	want := fmt.Sprintf(":%04X", port)
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(table))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != "0A" || !strings.HasSuffix(f[1], want) {
			continue
		}
		out = append(out, f[9])
	}
	return out
}

// memSampler follows a server's processes: every interval it adds up their
// resident sets, keeping the peak over the server's life and over the
// current cell (reset by cellStart).
type memSampler struct {
	root     int
	interval time.Duration
	// extra are roots of processes started beside the server that are
	// part of its cost (Aegra's PostgreSQL): counted in both figures,
	// memory and CPU.
	extra []int

	mu         sync.Mutex
	all        []int // root and descendants, rescanned every second
	server     []int // the listening process and its descendants
	serverPID  int
	peakAll    int64
	peakServer int64
	cellAll    int64
	cellServer int64

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newMemSampler(root int, interval time.Duration, extra ...int) *memSampler {
	m := &memSampler{root: root, interval: interval, all: []int{root}, extra: extra,
		stop: make(chan struct{}), done: make(chan struct{})}
	go m.loop()
	return m
}

// setServerPID names the process that listens on the server's port.
func (m *memSampler) setServerPID(pid int) {
	m.mu.Lock()
	m.serverPID = pid
	m.mu.Unlock()
	m.rescan()
}

func (m *memSampler) rescan() {
	all := descendants(m.root)
	m.mu.Lock()
	spid := m.serverPID
	m.mu.Unlock()
	var server []int
	if spid > 0 {
		server = descendants(spid)
	}
	for _, x := range m.extra {
		if x > 0 {
			d := descendants(x)
			all = append(all, d...)
			server = append(server, d...)
		}
	}
	m.mu.Lock()
	m.all, m.server = all, server
	m.mu.Unlock()
}

func (m *memSampler) loop() {
	defer close(m.done)
	t := time.NewTicker(m.interval)
	defer t.Stop()
	lastScan := time.Now()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		if time.Since(lastScan) >= time.Second {
			m.rescan()
			lastScan = time.Now()
		}
		m.sample()
	}
}

func (m *memSampler) sample() {
	m.mu.Lock()
	all, server := m.all, m.server
	m.mu.Unlock()
	var sumAll, sumServer int64
	for _, pid := range all {
		sumAll += rssKB(pid)
	}
	for _, pid := range server {
		sumServer += rssKB(pid)
	}
	m.mu.Lock()
	m.peakAll = max(m.peakAll, sumAll)
	m.peakServer = max(m.peakServer, sumServer)
	m.cellAll = max(m.cellAll, sumAll)
	m.cellServer = max(m.cellServer, sumServer)
	m.mu.Unlock()
}

// cellStart resets the per-cell peaks.
func (m *memSampler) cellStart() {
	m.sample()
	m.mu.Lock()
	m.cellAll, m.cellServer = 0, 0
	m.mu.Unlock()
	m.sample()
}

// cellPeaks returns the per-cell peaks (all processes, server processes).
func (m *memSampler) cellPeaks() (int64, int64) {
	m.sample()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cellAll, m.cellServer
}

// hwm adds up VmHWM (the kernel's own peak resident set) of the server's
// processes and of all processes; call it before stopping the server.
func (m *memSampler) hwm() (all, server int64) {
	m.rescan()
	m.mu.Lock()
	a, s := m.all, m.server
	m.mu.Unlock()
	for _, pid := range a {
		all += statusKB(pid, "VmHWM")
	}
	for _, pid := range s {
		server += statusKB(pid, "VmHWM")
	}
	return all, server
}

// close stops sampling and returns the peaks over the server's life.
func (m *memSampler) close() (all, server int64) {
	m.closeOnce.Do(func() {
		m.sample()
		close(m.stop)
		<-m.done
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peakAll, m.peakServer
}

// Machine describes where the benchmark ran.
type Machine struct {
	CPUModel   string `json:"cpu_model"`
	Cores      int    `json:"cores"`
	MemTotalKB int64  `json:"mem_total_kb"`
	Kernel     string `json:"kernel"`
	GoVersion  string `json:"go_version"`
	LoadStart  string `json:"loadavg_start"`
	LoadEnd    string `json:"loadavg_end"`
}

func readMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemTotalKB = parseStatusKB(b, "MemTotal")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.LoadStart = loadavg()
	return m
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// clockTick is USER_HZ, the unit of /proc CPU times; 100 on every Linux
// architecture Go supports here.
const clockTick = 100

// cpuJiffies is the CPU time (user+system) a process has used so far.
func cpuJiffies(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	return parseStatCPU(b)
}

func parseStatCPU(stat []byte) int64 {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// machineBusyJiffies is the CPU time all cores spent busy (not idle or
// waiting on I/O) since boot, from /proc/stat.
func machineBusyJiffies() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseProcStatBusy(line)
}

func parseProcStatBusy(cpuLine string) int64 {
	f := strings.Fields(cpuLine)
	if len(f) < 6 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		// user nice system idle iowait irq softirq steal (guest is in user)
		if i == 3 || i == 4 || i >= 8 {
			continue
		}
		busy += n
	}
	return busy
}

// cpuSnapshot is taken at a cell's start and end to split the machine's CPU
// time between the server, the load generator and everything else.
type cpuSnapshot struct {
	at      time.Time
	machine int64
	server  int64
	self    int64
}

func (m *memSampler) cpuSnapshot() cpuSnapshot {
	m.rescan()
	m.mu.Lock()
	pids := m.all
	m.mu.Unlock()
	s := cpuSnapshot{at: time.Now(), machine: machineBusyJiffies(), self: cpuJiffies(os.Getpid())}
	for _, pid := range pids {
		s.server += cpuJiffies(pid)
	}
	return s
}
