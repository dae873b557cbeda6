//go:build linux

package deploy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netjam/netjam/internal/testenv"
)

// The sweeps TestSlurmCluster runs, on the virtual clock: the same from
// the same seed, so a sweep run whole and its shards merged give the same
// sweep.csv, byte for byte. smallSweep has 8 runs, one per shard of the
// script's 8; longerSweep 24 runs, 6 per shard of 4, each shard a few
// seconds long: long enough to cancel one while it runs.
const (
	smallSweep = `name: small
clock: virtual
duration: 1s
link: {delay: 2ms}
flows: [{name: probe, type: udp, interval: 1ms, count: 100}]
sweep:
  grid:
    link.loss: [2%, 10%]
    link.delay: [1ms, 3ms]
  seeds: 2
`
	longerSweep = `name: longer
clock: virtual
duration: 3s
link: {delay: 2ms}
flows: [{name: probe, type: udp, interval: 1ms, count: 2000}]
sweep:
  grid:
    link.loss: [2%, 10%]
    link.delay: [1ms, 3ms]
  seeds: 6
`
)

// TestSlurmCluster runs deploy/slurm-array.sh on a real one-node Slurm
// cluster (munged, slurmctld and slurmd of the test's own), submitted as
// the README says by an unprivileged user from a fresh folder: a sweep of
// the script's 8 shards, then a longer one of 4 shards, one of whose tasks
// is cancelled while it runs and submitted again with the command netjam
// merge prints. Each time the merged shards' sweep.csv must be the whole
// sweep's, byte for byte. Without Slurm, munge or root the test is
// skipped, unless NETJAM_REQUIRE_TUN=1 (CI).
func TestSlurmCluster(t *testing.T) {
	// What the test types is what the README tells a user to.
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"    sbatch deploy/slurm-array.sh ", "    NETJAM_SHARDS=4 sbatch --array=0-3 deploy/slurm-array.sh ",
		"    netjam merge results/shard-* --out results/merged\n", "    sbatch --array=5 deploy/slurm-array.sh ",
		"&& NETJAM_SHARDS=4 sbatch --array=1 deploy/slurm-array.sh "} {
		if !strings.Contains(string(readme), line) {
			t.Errorf("README.md does not say %q", line)
		}
	}
	start := time.Now()
	cl := startSlurm(t)
	t.Logf("cluster up: %.1f s", time.Since(start).Seconds())
	start = time.Now()
	netjam := buildNetjam(t, cl.dir)
	t.Logf("netjam built: %.1f s", time.Since(start).Seconds())
	// A fresh folder for each sweep (results/ is the script's), holding
	// the script where the README has it, and the scenario.
	script, err := os.ReadFile("slurm-array.sh")
	if err != nil {
		t.Fatal(err)
	}
	works := map[string]string{}
	for name, scenario := range map[string]string{"small": smallSweep, "longer": longerSweep} {
		work := cl.userFolder(t, name)
		os.Mkdir(filepath.Join(work, "deploy"), 0o755)
		os.WriteFile(filepath.Join(work, "deploy", "slurm-array.sh"), script, 0o755)
		os.WriteFile(filepath.Join(work, name+".yaml"), []byte(scenario), 0o644)
		cl.chownUser(t, work)
		works[name] = work
	}
	bin := filepath.Dir(netjam)

	// The sweeps run whole, meanwhile, for the comparison.
	whole := map[string]chan string{}
	var running sync.WaitGroup
	t.Cleanup(running.Wait) // before the cluster's folder goes
	for _, name := range []string{"small", "longer"} {
		ch := make(chan string, 1)
		whole[name] = ch
		running.Add(1)
		go func() {
			defer running.Done()
			out := filepath.Join(cl.dir, "whole-"+name)
			cmd := exec.Command(netjam, "sweep", filepath.Join(works[name], name+".yaml"), "--out", out, "-q", "--parallel", "2")
			if b, err := cmd.CombinedOutput(); err != nil {
				ch <- fmt.Sprintf("sweep %s whole: %v\n%s", name, err, b)
				return
			}
			if b, err := exec.Command(netjam, "merge", out).CombinedOutput(); err != nil {
				ch <- fmt.Sprintf("merge %s whole: %v\n%s", name, err, b)
				return
			}
			ch <- out
		}()
	}
	sameAsWhole := func(name, merged string) {
		t.Helper()
		out := <-whole[name]
		whole[name] <- out
		a, err := os.ReadFile(filepath.Join(out, "sweep.csv"))
		if err != nil {
			t.Fatalf("%v (%s)", err, out)
		}
		b, err := os.ReadFile(filepath.Join(merged, "sweep.csv"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the shards merged are not the sweep run whole:\nwhole:\n%s\nmerged:\n%s", name, a, b)
		}
	}

	// The README: sbatch deploy/slurm-array.sh SCENARIO, then netjam merge.
	start = time.Now()
	work, user := works["small"], cl.user(bin, works["small"])
	job := cl.submit(t, user, "sbatch deploy/slurm-array.sh small.yaml")
	cl.wait(t, job, work)
	if got := cl.states(t, job); got != "0-7:COMPLETED" {
		t.Fatalf("small sweep: tasks %s, want 0-7:COMPLETED", got)
	}
	t.Logf("8 shards of 8 runs on Slurm: %.1f s", time.Since(start).Seconds())
	if out, code := user.run(t, "netjam merge results/shard-* --out results/merged"); code != 0 {
		t.Fatalf("merge: exit %d\n%s", code, out)
	}
	sameAsWhole("small", filepath.Join(work, "results", "merged"))

	// 4 shards; task 1 cancelled as it runs.
	start = time.Now()
	work, user = works["longer"], cl.user(bin, works["longer"])
	env := "NETJAM_SHARDS=4 "
	job = cl.submit(t, user, env+"sbatch --array=0-3 deploy/slurm-array.sh longer.yaml")
	// Cancelled once it has finished a run of its 6 (it resumes from
	// there): a shard takes seconds, the test looks every 50 ms.
	poll(t, "task 1 to finish a run", time.Minute, func() bool {
		done, _ := filepath.Glob(filepath.Join(work, "results", "shard-1", "*", "sweep-run.json"))
		return len(done) > 0
	})
	user.run(t, "scancel "+job+"_1")
	cl.wait(t, job, work)
	if got := cl.states(t, job); got != "0:COMPLETED 1:CANCELLED 2-3:COMPLETED" {
		t.Fatalf("longer sweep: tasks %s, want task 1 CANCELLED (it finished before scancel?), the others COMPLETED", got)
	}
	// merge names the shard and its task, and the command that runs it
	// again: the README's sbatch --array=1.
	merge := "netjam merge results/shard-* --out results/merged"
	out, code := user.run(t, merge)
	rerun := "cd " + work + " && " + env + "sbatch --array=1 deploy/slurm-array.sh longer.yaml"
	if !regexp.MustCompile(`(?m)^  shard 1/4 \(Slurm array task 1\), in results/shard-1: runs? (5|9|13|17|21)(, \d+)*$`).MatchString(out) ||
		code != 1 || !strings.HasSuffix(out, "\n  "+rerun+"\n") {
		t.Fatalf("merge of the sweep lacking a shard's runs: exit %d, want 1, the shard, its runs, and then\n  %s\n%s", code, rerun, out)
	}
	job = cl.submit(t, user, rerun)
	cl.wait(t, job, work)
	if got := cl.states(t, job); got != "1:COMPLETED" {
		t.Fatalf("task 1 submitted again: %s, want 1:COMPLETED", got)
	}
	t.Logf("4 shards of 24 runs, one cancelled and submitted again: %.1f s", time.Since(start).Seconds())
	if out, code := user.run(t, merge); code != 0 {
		t.Fatalf("merge: exit %d\n%s", code, out)
	}
	sameAsWhole("longer", filepath.Join(work, "results", "merged"))
}

// slurmCluster is a one-node Slurm cluster of the test's own: munged,
// slurmctld and slurmd, children of the test, with their configuration,
// key, spool, state and logs in one temporary folder and their ports on
// loopback. Cleanup cancels its jobs, waits for them to end, and stops
// the three by PID.
type slurmCluster struct {
	dir      string // the cluster's, readable by everyone
	conf     string // slurm.conf
	uid, gid int    // the unprivileged user who submits
}

// startSlurm starts the cluster and waits for its node to be idle.
func startSlurm(t *testing.T) *slurmCluster {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("Slurm runs on Linux")
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "not running as root: slurmd starts each task as the user who submitted it (run: sudo go test ./deploy/)")
	}
	for _, p := range []string{"munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "sinfo"} {
		testenv.RequireTool(t, p, "slurm-wlm munge")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("no user nobody to submit as: %v", err))
	}
	cl := &slurmCluster{}
	cl.uid, _ = strconv.Atoi(nobody.Uid)
	cl.gid, _ = strconv.Atoi(nobody.Gid)

	// Not t.TempDir: its parent is private to root, and the tasks, run as
	// nobody, read the script's and netjam's folders.
	if cl.dir, err = os.MkdirTemp("", "netjam-slurm-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cl.dir) })
	os.Chmod(cl.dir, 0o755)
	for _, d := range []string{"munge", "sock", "state", "spool", "log"} {
		os.Mkdir(filepath.Join(cl.dir, d), 0o755)
	}
	os.Chmod(filepath.Join(cl.dir, "munge"), 0o700) // munged refuses a key others may read
	key := make([]byte, 1024)
	rand.Read(key)
	if err := os.WriteFile(filepath.Join(cl.dir, "munge", "munge.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}

	// The node as slurmd sees it (CPUs, sockets, memory): a node
	// configured with more than it has is drained.
	out, err := exec.Command("slurmd", "-C").Output()
	node, _, _ := strings.Cut(string(out), "\n")
	m := regexp.MustCompile(`^NodeName=\S+ (.*RealMemory=(\d+).*)$`).FindStringSubmatch(node)
	if err != nil || m == nil {
		t.Fatalf("slurmd -C: %v\n%s", err, out)
	}
	if mem, _ := strconv.Atoi(m[2]); mem < 2048 {
		testenv.Missing(t, fmt.Sprintf("the machine has %d MiB of memory; the script asks 2 GiB a task (--mem=2G)", mem))
	}
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	sock := filepath.Join(cl.dir, "sock", "munge.socket")
	cl.conf = filepath.Join(cl.dir, "slurm.conf")
	conf := fmt.Sprintf(`# A one-node cluster of netjam's TestSlurmCluster.
ClusterName=netjamtest
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%[4]s
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
SlurmctldLogFile=%[5]s/log/slurmctld.log
SlurmdLogFile=%[5]s/log/slurmd.log
# No cgroups (a container may have none to give): processes are tracked
# by their parents, and tasks are not confined.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
# Start a pending task as soon as a core is free (default: up to 3 s later).
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
NodeName=netjam NodeHostname=%[1]s NodeAddr=127.0.0.1 %[6]s State=UNKNOWN
PartitionName=test Nodes=netjam Default=YES MaxTime=INFINITE State=UP
`, host, freePort(t), freePort(t), sock, cl.dir, m[1])
	if err := os.WriteFile(cl.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}

	var daemons []*daemon
	t.Cleanup(func() {
		start := time.Now()
		defer func() { t.Logf("cluster stopped: %.1f s", time.Since(start).Seconds()) }()
		if len(daemons) == 3 {
			cl.cancelAll(t)
		}
		for i := len(daemons) - 1; i >= 0; i-- {
			daemons[i].stop(t)
		}
		if t.Failed() {
			for _, f := range []string{"slurmctld.log", "slurmd.log", "munged.out", "slurmctld.out", "slurmd.out"} {
				b, _ := os.ReadFile(filepath.Join(cl.dir, "log", f))
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("%s:\n%s", f, b)
			}
		}
	})
	daemons = append(daemons, cl.start(t, "munged", "munged", "-F", "--key-file="+filepath.Join(cl.dir, "munge", "munge.key"),
		"--socket="+sock, "--pid-file="+filepath.Join(cl.dir, "munge", "munged.pid"),
		"--log-file="+filepath.Join(cl.dir, "log", "munged.log"), "--seed-file="+filepath.Join(cl.dir, "munge", "seed")))
	poll(t, "munged's socket", 10*time.Second, func() bool { _, err := os.Stat(sock); return err == nil })
	daemons = append(daemons, cl.start(t, "slurmctld", "slurmctld", "-D", "-f", cl.conf))
	daemons = append(daemons, cl.start(t, "slurmd", "slurmd", "-D", "-N", "netjam", "-f", cl.conf))
	poll(t, "the node to be idle", 30*time.Second, func() bool {
		out, _ := cl.command("sinfo", "-h", "-N", "-o", "%T").Output()
		return strings.TrimSpace(string(out)) == "idle"
	})
	return cl
}

// daemon is a process of the cluster, a child of the test.
type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
}

// start starts a daemon, its output into log/NAME.out.
func (cl *slurmCluster) start(t *testing.T, name string, args ...string) *daemon {
	t.Helper()
	out, err := os.Create(filepath.Join(cl.dir, "log", name+".out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "SLURM_CONF="+cl.conf)
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("%s: %v", name, err)
	}
	d := &daemon{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); out.Close(); close(d.done) }()
	return d
}

// stop ends the daemon by its PID: SIGTERM, and SIGKILL 10 s later.
func (d *daemon) stop(t *testing.T) {
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		t.Errorf("%s (pid %d) did not end on SIGTERM: killed", d.name, d.cmd.Process.Pid)
		d.cmd.Process.Kill()
		<-d.done
	}
}

// cancelAll cancels every job of the cluster and waits for none to be
// left, so that no task outlives slurmd.
func (cl *slurmCluster) cancelAll(t *testing.T) {
	cl.command("scancel", "--user", strconv.Itoa(cl.uid)).Run()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := cl.command("squeue", "-h", "-o", "%i").Output()
		if err == nil && len(bytes.TrimSpace(out)) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("jobs still there after scancel: %v\n%s", err, out)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// command is a Slurm client command on the cluster, run as root.
func (cl *slurmCluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+cl.conf)
	return cmd
}

// userFolder makes a folder of the cluster's that belongs to the user.
func (cl *slurmCluster) userFolder(t *testing.T, name string) string {
	p := filepath.Join(cl.dir, name)
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	cl.chownUser(t, p)
	return p
}

// chownUser gives the folder p and everything in it to the user.
func (cl *slurmCluster) chownUser(t *testing.T, p string) {
	err := filepath.Walk(p, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, cl.uid, cl.gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// shellUser runs shell commands as the cluster's unprivileged user, in
// its working folder, with netjam on its PATH.
type shellUser struct {
	cl        *slurmCluster
	path, dir string
}

func (cl *slurmCluster) user(bin, dir string) *shellUser {
	return &shellUser{cl: cl, path: bin + ":/usr/local/bin:/usr/bin:/bin", dir: dir}
}

// run runs the command line as the user types it, and returns its output
// and exit status.
func (u *shellUser) run(t *testing.T, line string) (string, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Dir = u.dir
	cmd.Env = []string{"PATH=" + u.path, "SLURM_CONF=" + u.cl.conf, "HOME=" + u.dir, "LANG=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.cl.uid), Gid: uint32(u.cl.gid)}}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return string(out), 0
}

// submit runs an sbatch command line as the user and returns the job's
// ID.
func (cl *slurmCluster) submit(t *testing.T, u *shellUser, line string) string {
	t.Helper()
	out, code := u.run(t, line)
	m := regexp.MustCompile(`(?m)^Submitted batch job (\d+)$`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("%s: exit %d\n%s", line, code, out)
	}
	return m[1]
}

// wait waits for every task of the job to end, at most 3 minutes; the
// tasks' output files in work are logged if the test fails.
func (cl *slurmCluster) wait(t *testing.T, job, work string) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			outs, _ := filepath.Glob(filepath.Join(work, "slurm-"+job+"_*.out"))
			for _, o := range outs {
				b, _ := os.ReadFile(o)
				t.Logf("%s:\n%s", filepath.Base(o), b)
			}
		}
	})
	poll(t, "job "+job+" to end", 3*time.Minute, func() bool {
		out, err := cl.command("squeue", "-h", "-j", job, "-o", "%i").Output()
		return err == nil && len(bytes.TrimSpace(out)) == 0
	})
}

// states returns how each task of an ended job ended, as "0:COMPLETED
// 1:CANCELLED 2-3:COMPLETED" (slurmctld keeps ended jobs for MinJobAge,
// 300 s).
func (cl *slurmCluster) states(t *testing.T, job string) string {
	t.Helper()
	out, err := cl.command("scontrol", "-o", "show", "job", job).Output()
	if err != nil {
		t.Fatalf("scontrol show job %s: %v", job, err)
	}
	state := map[int]string{}
	re := regexp.MustCompile(`ArrayTaskId=(\d+) .*JobState=(\S+)`)
	last := -1
	for _, line := range strings.Split(string(out), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			i, _ := strconv.Atoi(m[1])
			state[i] = m[2]
			last = max(last, i)
		}
	}
	var parts []string
	for i := 0; i <= last; {
		if _, ok := state[i]; !ok {
			i++
			continue
		}
		j := i
		for state[j+1] == state[i] {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d:%s", i, j, state[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d:%s", i, state[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, " ")
}

// buildNetjam builds netjam into dir/bin, a folder every user may read.
func buildNetjam(t *testing.T, dir string) string {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	bin := filepath.Join(dir, "bin", "netjam")
	if out, err := exec.Command(goTool, "build", "-o", bin, "../cmd/netjam").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// freePort returns a TCP port of loopback that no one listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// poll waits for cond, every 50 ms, at most limit.
func poll(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
	}
}
