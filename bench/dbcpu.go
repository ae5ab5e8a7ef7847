package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// dbCPU is the CPU time the local PostgreSQL server has used so far: every
// live postgres process (backends, the walsender, background workers), plus
// what the postmaster has collected from its exited children. The difference
// of two readings is the database's CPU between them, whoever caused it: the
// benchmark runs the database on this machine, so its cost is visible here
// and not only in a managed service's bill. ok is false when no server
// process is found (a remote database).
func dbCPU() (cpu time.Duration, ok bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	type proc struct {
		ppid        int
		own, reaped int64 // clock ticks
	}
	procs := map[int]proc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
		if len(f) < 15 {
			continue
		}
		var n [5]int64
		for i, k := range []int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
			n[i], _ = strconv.ParseInt(f[k], 10, 64)
		}
		procs[pid] = proc{ppid: int(n[0]), own: n[1] + n[2], reaped: n[3] + n[4]}
	}
	var ticks int64
	for _, p := range procs {
		ticks += p.own
		if _, child := procs[p.ppid]; !child {
			ticks += p.reaped // the postmaster: its exited backends
		}
	}
	return time.Duration(ticks) * time.Second / 100, len(procs) > 0 // USER_HZ
}

// dbMeter measures the database's CPU from its creation to done.
type dbMeter struct {
	start time.Duration
	ok    bool
}

func newDBMeter() dbMeter {
	c, ok := dbCPU()
	return dbMeter{start: c, ok: ok}
}

// done returns the CPU used since the meter was made (-1: not measurable).
func (m dbMeter) done() time.Duration {
	c, ok := dbCPU()
	if !m.ok || !ok {
		return -1
	}
	return c - m.start
}

// cpuSeconds prints a measured CPU time, "-" for one not measured.
func cpuSeconds(s float64) string {
	if s < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", s)
}
