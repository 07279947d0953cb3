package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procMem is the resident memory of one process.
type procMem struct {
	Name     string  `json:"name"`
	PID      int     `json:"pid"`
	VMRSSMiB float64 `json:"vmrss_mib"`
	VMHWMMiB float64 `json:"vmhwm_mib"`
	// The two parts of VmRSS: the process's own memory (heap, stacks),
	// and the pages of files it maps, most of them its executable's,
	// which are shared with other processes and can be dropped.
	RSSAnonMiB float64 `json:"rss_anon_mib"`
	RSSFileMiB float64 `json:"rss_file_mib"`
	Error      string  `json:"error,omitempty"`
}

// readMem reads VmRSS, VmHWM, RssAnon and RssFile from /proc/PID/status.
func readMem(name string, pid int) procMem {
	m := procMem{Name: name, PID: pid}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		m.Error = err.Error()
		return m
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 {
			kib, _ := strconv.ParseFloat(fields[1], 64)
			if dst := map[string]*float64{"VmRSS:": &m.VMRSSMiB, "VmHWM:": &m.VMHWMMiB, "RssAnon:": &m.RSSAnonMiB, "RssFile:": &m.RSSFileMiB}[fields[0]]; dst != nil {
				*dst = kib / 1024
			}
		}
	}
	return m
}

// readRSS reads the memory of processes, and the sum of their VmRSS.
func readRSS(pids namedPIDs) ([]procMem, float64) {
	var mems []procMem
	var total float64
	for _, p := range pids {
		mems = append(mems, readMem(p.name, p.pid))
		total += mems[len(mems)-1].VMRSSMiB
	}
	return mems, total
}

// namedPIDs is a repeatable name=PID flag.
type namedPIDs []struct {
	name string
	pid  int
}

func (p *namedPIDs) String() string { return fmt.Sprint(*p) }
func (p *namedPIDs) Set(s string) error {
	name, v, ok := strings.Cut(s, "=")
	pid, err := strconv.Atoi(v)
	if !ok || err != nil || pid <= 0 {
		return fmt.Errorf("want name=PID, got %q", s)
	}
	*p = append(*p, struct {
		name string
		pid  int
	}{name, pid})
	return nil
}

type startResult struct {
	Name        string    `json:"name"`
	Command     []string  `json:"command"`
	PID         int       `json:"pid"`
	ReadyMs     float64   `json:"launch_to_ready_ms"`
	SinceT0Ms   float64   `json:"t0_to_ready_ms,omitempty"`
	Polls       int       `json:"readyz_polls"`
	IdleSec     float64   `json:"idle_seconds"`
	Mem         []procMem `json:"mem"`
	TotalRSSMiB float64   `json:"total_vmrss_mib"`
	StopMs      float64   `json:"stop_ms"`
	Error       string    `json:"error,omitempty"`
}

// runStart launches a server, times launch -> /readyz "ok", reads its
// resident memory after an idle pause, and stops it (SIGTERM, then SIGKILL).
func runStart(args []string) error {
	fs := flag.NewFlagSet("start", flag.ExitOnError)
	var t tlsFlags
	t.register(fs)
	var (
		name    = fs.String("name", "server", "name of the measured process in the results")
		readyz  = fs.String("readyz", "", "readiness URL; ready is HTTP 200 with body \"ok\" (loopback only)")
		every   = fs.Duration("poll", 5*time.Millisecond, "readiness poll interval")
		timeout = fs.Duration("timeout", 60*time.Second, "give up if not ready after this long")
		idle    = fs.Duration("idle", 5*time.Second, "idle time after ready before reading VmRSS")
		logFile = fs.String("log", "", "file for the server's stdout and stderr (default: discard)")
		t0ns    = fs.Int64("t0-unix-ns", 0, "also report the time to ready from this instant (e.g. when a separate etcd was launched)")
		jsonOut = fs.String("json", "", "write the result as JSON to this file")
		others  namedPIDs
	)
	fs.Var(&others, "rss-pid", "name=PID of another process whose VmRSS is counted too (repeatable)")
	_ = fs.Parse(args)
	if len(fs.Args()) == 0 {
		return errors.New("start: give the command to launch after --")
	}
	c, err := connect(*readyz, t, 1)
	if err != nil {
		return err
	}
	c.hc.Timeout = time.Second
	res := &startResult{Name: *name, Command: fs.Args(), IdleSec: idle.Seconds()}
	out := io.Discard
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	cmd := exec.Command(res.Command[0], res.Command[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	exited := make(chan struct{}) // closed when the server has exited; waitErr is then how
	var waitErr error
	stop := func() {
		t0 := time.Now()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		res.StopMs = ms(time.Since(t0))
	}
	launch := time.Now()
	err = cmd.Start()
	if err == nil {
		res.PID = cmd.Process.Pid
		go func() { waitErr = cmd.Wait(); close(exited) }()
		// If crdbench is interrupted, do not leave the server behind.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		go func() { <-sigs; stop(); os.Exit(130) }()
		var ready time.Time
		exitedNow := func() bool {
			select {
			case <-exited:
				return true
			default:
				return false
			}
		}
		pollUntil(*timeout, *every, func() bool {
			res.Polls++
			if resp, err := c.hc.Get(*readyz); err == nil {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && strings.TrimSpace(string(b)) == "ok" {
					ready = time.Now()
				}
			}
			return !ready.IsZero() || exitedNow()
		})
		switch {
		case ready.IsZero() && exitedNow():
			err = fmt.Errorf("%s exited before it was ready: %v (see %s)", *name, waitErr, *logFile)
		case ready.IsZero():
			stop()
			err = fmt.Errorf("%s not ready after %v", *name, *timeout)
		default:
			res.ReadyMs = ms(ready.Sub(launch))
			if *t0ns > 0 {
				res.SinceT0Ms = ms(ready.Sub(time.Unix(0, *t0ns)))
			}
			if time.Sleep(*idle); exitedNow() {
				err = fmt.Errorf("%s exited while idle: %v", *name, waitErr)
			}
		}
	}
	if err != nil {
		res.Error = err.Error()
		if *jsonOut != "" {
			_ = writeJSON(*jsonOut, res)
		}
		return err
	}
	res.Mem, res.TotalRSSMiB = readRSS(append(namedPIDs{{*name, res.PID}}, others...))
	stop()
	fmt.Printf("%s: launch -> /readyz ok %.1f ms (%d polls)", *name, res.ReadyMs, res.Polls)
	if res.SinceT0Ms > 0 {
		fmt.Printf(", %.1f ms after t0", res.SinceT0Ms)
	}
	fmt.Printf("; after %v idle:", *idle)
	for _, m := range res.Mem {
		fmt.Printf(" %s VmRSS %.1f MiB (anon %.1f, file %.1f);", m.Name, m.VMRSSMiB, m.RSSAnonMiB, m.RSSFileMiB)
	}
	fmt.Printf(" total %.1f MiB; stopped in %.0f ms\n", res.TotalRSSMiB, res.StopMs)
	if *jsonOut != "" {
		return writeJSON(*jsonOut, res)
	}
	return nil
}

// runRSS reads the resident memory of running processes.
func runRSS(args []string) error {
	fs := flag.NewFlagSet("rss", flag.ExitOnError)
	jsonOut := fs.String("json", "", "write the result as JSON to this file")
	label := fs.String("label", "", "what state the processes are in")
	_ = fs.Parse(args)
	var pids namedPIDs
	for _, a := range fs.Args() {
		if err := pids.Set(a); err != nil {
			return err
		}
	}
	res := struct {
		Label       string    `json:"label"`
		Mem         []procMem `json:"mem"`
		TotalRSSMiB float64   `json:"total_vmrss_mib"`
	}{Label: *label}
	res.Mem, res.TotalRSSMiB = readRSS(pids)
	for _, m := range res.Mem {
		fmt.Printf("%s pid %d VmRSS %.1f MiB (anon %.1f, file %.1f) VmHWM %.1f MiB %s\n", m.Name, m.PID, m.VMRSSMiB, m.RSSAnonMiB, m.RSSFileMiB, m.VMHWMMiB, m.Error)
	}
	if *jsonOut != "" {
		return writeJSON(*jsonOut, res)
	}
	return nil
}

// runFreePort prints n distinct free TCP ports on 127.0.0.1.
func runFreePort(args []string) error {
	fs := flag.NewFlagSet("freeport", flag.ExitOnError)
	n := fs.Int("n", 1, "how many ports")
	_ = fs.Parse(args)
	for i := 0; i < *n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer l.Close()
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
	}
	return nil
}
