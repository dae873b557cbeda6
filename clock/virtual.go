package clock

import (
	"bytes"
	"container/heap"
	"context"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Virtual is a clock on which time passes only when nothing else can
// happen: Run fires the earliest timer, waits until every goroutine of the
// process is blocked again, and fires the next. A run on a Virtual clock
// takes as long as its work, not as long as its duration, and since only
// one timer fires at a time, with everything it sets off finished before
// the next, the order of events does not depend on the goroutine
// scheduler: the same seed gives the same run.
//
// What "blocked" means is read from the runtime (see quiet), so it is the
// whole process that must be idle: every goroutine that does the run's
// work must wait on this clock, on channels or on locks, never on the wall
// clock or the network, or time skips over that work. Goroutines blocked
// on the wall clock or on I/O count as idle: a control API may change the
// run at any time, and the change takes effect at the virtual instant it
// lands on.
//
// Its zero time is Epoch.
type Virtual struct {
	mu     sync.Mutex // guards now, timers and seq
	now    time.Time
	timers vtimers
	seq    uint64 // orders timers of the same deadline by when they were set

	stats VirtualStats // guarded by mu

	held atomic.Int64 // Holds not yet Released

	settling []*Settler // waiting in Settle, in order; guarded by mu
	stopped  bool       // Run has returned: Settle waits no more; guarded by mu
}

// Hold tells a Virtual clock that the caller does work that belongs to the
// current instant and may block in a system call meanwhile (a capture
// writing its file, the sampler writing rows): time does not move until
// the matching Release. The runtime's view of a goroutine in a system
// call is too coarse to tell such work from a wait on the outside world
// (see quietness). On other clocks Hold does nothing. It allocates
// nothing.
func Hold(c Clock) {
	if v, ok := c.(*Virtual); ok {
		v.held.Add(1)
	}
}

// Release ends a Hold.
func Release(c Clock) {
	if v, ok := c.(*Virtual); ok {
		v.held.Add(-1)
	}
}

// A Settler lets one goroutine wait until what it has set off is done: on
// a Virtual clock, Settle returns once every other goroutine is blocked, as
// Run waits before it fires a timer, without moving time. A goroutine that
// hands another work in several pieces at one instant (a host's inbox
// handing gVisor the packets that arrived together) settles after each, so
// the other takes them up one by one, as it would had they come apart,
// and never two at once or one at a time as the scheduler happens to run
// it: the order of events, and the run, then do not depend on the
// scheduler. Each goroutine needs a Settler of its own.
//
// On any other clock a Settler is nil, and Settle does nothing.
type Settler struct {
	v  *Virtual
	ch chan struct{}
}

// NewSettler returns a Settler for c: nil unless c is a *Virtual.
func NewSettler(c Clock) *Settler {
	v, ok := c.(*Virtual)
	if !ok {
		return nil
	}
	return &Settler{v: v, ch: make(chan struct{}, 1)}
}

// Settle waits until every other goroutine is blocked (or the clock's Run
// has returned). Settlers waiting at once are let go one at a time, in
// the order they came, each once the process is idle again, and all
// before the next timer fires. It allocates nothing in steady state.
func (s *Settler) Settle() {
	if s == nil {
		return
	}
	v := s.v
	v.mu.Lock()
	if v.stopped {
		v.mu.Unlock()
		return
	}
	v.settling = append(v.settling, s)
	v.mu.Unlock()
	<-s.ch
}

// VirtualStats tells what driving a Virtual clock took.
type VirtualStats struct {
	// Events is how many timers Run fired.
	Events uint64
	// StackChecks is how many times Run stopped the world to tell
	// whether the process was idle (see quietness).
	StackChecks uint64
	// GaveUp is how many times Run moved time on while a goroutine was
	// in a system call, after waiting syscallPatience for it: each is a
	// place where two runs of one seed may part.
	GaveUp uint64
}

// NewVirtual returns a Virtual clock set to Epoch.
func NewVirtual() *Virtual { return &Virtual{now: Epoch} }

// Now returns the clock's current time.
func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// NewTimer returns a timer that sends on its channel when Run reaches its
// deadline.
func (v *Virtual) NewTimer(d time.Duration) Timer {
	t := &vtimer{v: v, i: -1, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// AfterFunc returns a timer that calls f in its own goroutine when Run
// reaches its deadline; Run waits for f (and whatever f sets off) to finish
// before it moves on.
func (v *Virtual) AfterFunc(d time.Duration, f func()) Timer {
	t := &vtimer{v: v, i: -1, f: f}
	t.Reset(d)
	return t
}

// Stats reports what driving the clock has taken so far.
func (v *Virtual) Stats() VirtualStats {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.stats
}

// idlePoll is how long Run sleeps, on the wall clock, when no timer is
// armed and the process is idle: only something outside the run (a
// control request, a signal) can give it work then.
const idlePoll = time.Millisecond

// driving is held by the Run that is looking for idleness or firing a
// timer. Idleness is the whole process's, so two virtual clocks driven at
// once (two runs of a sweep) must take turns: each would otherwise see
// the other's Run busy, forever. The waiting Run is parked on the lock,
// which counts as idle. This is the package's only mutable state, because
// what it guards belongs to the process.
var driving sync.Mutex

// Run moves time forward until ctx is done: each time the process is
// idle, it sets the clock to the earliest deadline and fires that one
// timer. Timers of the same deadline fire in the order they were set.
// Run must be called from one goroutine only.
func (v *Virtual) Run(ctx context.Context) {
	q := quietness{stats: &v.stats, mu: &v.mu}
	defer v.stop()
	defer oneProcessor()()
	for ctx.Err() == nil {
		if !v.step(ctx, &q) {
			time.Sleep(idlePoll)
		}
	}
}

// oneProcessor has the process run Go code on one processor
// (GOMAXPROCS 1) until every caller has called the function it returns,
// which gives back the processors taken away. It takes away as many as
// there were beyond one, and gives back as many, so that it composes with
// preciseSlots, which adds one and takes it back.
//
// A virtual run's work is serial: Run fires one event and waits until
// everything it set off is done. On more processors than one, Run's wait
// only spun on one processor while the work ran on another, and each of
// its yields (runtime.Gosched) woke an idle processor's thread to look
// for work, which the runtime's counts show as running: they looked busy
// until that thread gave up, and Run fell back to stack dumps, which stop
// the world (hundreds to thousands a run). Every handoff of the work from
// one goroutine to another woke a thread too. On one processor Run's
// readings run only when the work has yielded the processor, a handoff is
// a run queue's push, and the counts show no spinning thread: the three
// variants of configs/bottleneck-coexistence.yaml took 4.8 to 6.6 s of
// CPU time instead of 9.7 to 19.3 (netjam run, 4 runs before and 6 after,
// load average 1.7 to 4 on two cores), with 2 to 70 stack dumps a variant
// instead of 260 to 860, and wrote the same files.
func oneProcessor() func() {
	oneProcMu.Lock()
	defer oneProcMu.Unlock()
	if oneProcRuns == 0 {
		oneProcTaken = runtime.GOMAXPROCS(0) - 1
		if oneProcTaken > 0 {
			runtime.GOMAXPROCS(1)
		}
	}
	oneProcRuns++
	return func() {
		oneProcMu.Lock()
		defer oneProcMu.Unlock()
		oneProcRuns--
		if oneProcRuns == 0 && oneProcTaken > 0 {
			runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + oneProcTaken)
		}
	}
}

// oneProcRuns counts the Runs going on (two runs of a sweep take turns
// in one process), oneProcTaken the processors the first took away;
// oneProcMu guards both. Like driving, they belong to the process.
var (
	oneProcMu    sync.Mutex
	oneProcRuns  int
	oneProcTaken int
)

// stop lets every Settler go, now and later: nothing drives the clock.
func (v *Virtual) stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.stopped = true
	for _, s := range v.settling {
		s.ch <- struct{}{}
	}
	clear(v.settling)
	v.settling = v.settling[:0]
}

// step lets the first Settler go, or else fires the earliest timer, once
// the process is idle, and reports whether there was either.
func (v *Virtual) step(ctx context.Context, q *quietness) bool {
	driving.Lock()
	defer driving.Unlock()
	if !q.wait(ctx, &v.held) {
		return true
	}
	v.mu.Lock()
	if len(v.settling) > 0 {
		s := v.settling[0]
		n := copy(v.settling, v.settling[1:])
		v.settling[n] = nil
		v.settling = v.settling[:n]
		v.mu.Unlock()
		s.ch <- struct{}{}
		return true
	}
	if len(v.timers) == 0 {
		v.mu.Unlock()
		return false
	}
	t := heap.Pop(&v.timers).(*vtimer)
	if t.when.After(v.now) {
		v.now = t.when
	}
	v.stats.Events++
	v.mu.Unlock()
	if t.f != nil {
		go t.f()
		return true
	}
	select {
	case t.c <- t.when:
	default: // a firing is already pending; like time.Timer, never block
	}
	return true
}

type vtimer struct {
	v    *Virtual
	c    chan time.Time // nil for AfterFunc timers
	f    func()         // nil for channel timers
	when time.Time      // guarded by v.mu
	seq  uint64         // guarded by v.mu
	i    int            // index in v.timers, -1 when not armed; guarded by v.mu
}

func (t *vtimer) C() <-chan time.Time { return t.c }

func (t *vtimer) Reset(d time.Duration) {
	v := t.v
	v.mu.Lock()
	defer v.mu.Unlock()
	t.drain()
	if t.i >= 0 {
		heap.Remove(&v.timers, t.i)
	}
	t.when = v.now.Add(max(d, 0))
	v.seq++
	t.seq = v.seq
	heap.Push(&v.timers, t)
}

func (t *vtimer) Stop() bool {
	v := t.v
	v.mu.Lock()
	defer v.mu.Unlock()
	t.drain()
	if t.i < 0 {
		return false
	}
	heap.Remove(&v.timers, t.i)
	return true
}

func (t *vtimer) drain() { drain(t.c) }

// vtimers is a heap of armed timers by deadline, then by seq.
type vtimers []*vtimer

func (h vtimers) Len() int { return len(h) }
func (h vtimers) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}
func (h vtimers) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}
func (h *vtimers) Push(x any) {
	t := x.(*vtimer)
	t.i = len(*h)
	*h = append(*h, t)
}
func (h *vtimers) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h, t.i = old[:len(old)-1], -1
	return t
}

// quietness tells when every goroutine but the caller is blocked.
//
// The fast way reads the runtime's goroutine counts (runtime/metrics,
// Go 1.26): idle when none is runnable, only the caller runs, and no more
// are in system calls than when the process was last found idle, three
// readings in a row with a yield between them. Those counts are
// approximate: "running" counts the processors (Ps) in use, and a
// processor whose thread spins looking for work counts although no
// goroutine runs on it; measured on gVisor's TCP, that kept the count one
// too high for most of a run. So after slowAfter busy readings in a row
// the slow way decides: a stack dump of every goroutine, which stops the
// world and shows each one's real state. A stack dump also confirms quiet
// readings that follow one with a goroutine in a system call, or one that
// took long (see quietness.unsure): the counts lose sight of a goroutine
// for a moment as it leaves a long call.
//
// A goroutine in a system call is busy (a capture writing its file: the
// packet's work is not done), except the runtime's own readers
// (lifelongWaits), which wait in one for as long as they run. One that writes (or opens, closes, syncs a
// file) stays busy however long the call takes. One that reads, receives,
// accepts or polls (see waitingCall) and stays in that call longer than
// syscallPatience is waiting on the outside world (a device, a pipe):
// time moves on without it, and the wait is counted as given up
// (VirtualStats.GaveUp), since what that goroutine does next may land at a
// later virtual time than on another run.
//
// Go's testing/synctest would be the natural tool, but its bubbles do not
// count goroutines parked by gVisor's sleep package (its own linkname to
// runtime.gopark) as durably blocked, so a bubble with a gVisor stack
// never advances.
type quietness struct {
	samples [3]metrics.Sample
	// nonGoBase is the goroutines in system calls when the process was
	// last found idle, not counting those given up on: a goroutine that
	// takes a given-up reader's place in a system call (a write, once
	// the reader has returned) must not look idle.
	nonGoBase uint64
	// stuck holds the goroutines given up on while they stay in their
	// call: a stack dump counts them blocked, without waiting
	// syscallPatience for them again. One that leaves its call is
	// forgotten.
	stuck map[uint64]bool
	// unsure is set, until a stack dump next finds the process idle,
	// when a reading has found more goroutines in system calls than
	// nonGoBase, or took longer than slowReading. The counts cannot see
	// a goroutine leaving a system call whose processor was taken from
	// it: it stops counting as in the call before it is queued to run
	// (or runs), and if its thread is descheduled or waits for the
	// scheduler's lock in between (a lock these readings take, over and
	// over), quiet readings follow while that goroutine is about to run.
	// A slow reading is one during which this goroutine's thread was
	// descheduled, perhaps holding that lock, long enough for a whole
	// system call to pass unseen. So quiet readings after either are
	// confirmed by a stack dump, which shows that goroutine runnable.
	unsure bool
	buf    []byte
	stats  *VirtualStats // guarded by mu
	mu     *sync.Mutex
}

// stuckDump is how many busy readings are taken before a stack dump while
// goroutines given up on are in their calls (and so keep the fast way's
// count above its base): far fewer than slowAfter, since those
// goroutines will not leave soon.
const stuckDump = 64

// slowAfter is how many busy readings (about half a microsecond each, with
// a yield between) the fast way takes before a stack dump decides. A
// processor left spinning for work keeps "running" one too high for a
// while after the last goroutine blocked, longest on an idle machine,
// where no other thread takes its core; a stack dump stops the world. At
// 100 readings an idle machine dumped stacks at most events and ran the
// Wi-Fi newreno scenario 1.4 to 2.3 times faster than real time (at a
// load average of 5, 6 to 9); at 5000, 5.8 times, and bottleneck-coexistence's
// three variants in 3.7 s instead of 9.8 (BenchmarkVirtual, same
// sitting). 20000 was slower again: truly busy stretches wait longer.
const slowAfter = 5000

// readCounts reads the runtime's counts: metrics.Read, but for tests that
// make a reading slow.
var readCounts = metrics.Read

// slowReading is how long a reading of the runtime's counts may take
// before the readings that follow it are not trusted alone (see
// quietness.unsure): a reading takes about 0.1 µs (0.2 µs under the race
// detector, 11 µs at its 99.9th percentile), and one that takes longer
// than this had its thread descheduled.
const slowReading = 100 * time.Microsecond

// syscallPatience is how long, in wall time, a goroutine may stay in a
// system call before time moves on without it.
const syscallPatience = 200 * time.Millisecond

// wait returns when the process is idle (true) or ctx is done (false).
// It reads the runtime's counts of goroutines, cheaply, until they are
// quiet three times in a row, and lets a stack dump decide when they were
// busy too long or are not to be trusted alone (see unsure).
func (q *quietness) wait(ctx context.Context, held *atomic.Int64) bool {
	q.nameSamples()
	var n readings
	var p patience
	for {
		quiet := q.read(held)
		switch {
		case !n.add(quiet, len(q.stuck) > 0):
			runtime.Gosched()
			continue
		case quiet && !q.unsure:
			return true
		}
		// A stack dump decides: after many busy readings, or to confirm
		// quiet readings that follow a system call or a slow reading
		// (see unsure).
		if ctx.Err() != nil {
			return false
		}
		d := q.dump(held)
		n.ok = 0
		isIdle, yield := q.judge(d, &p)
		if isIdle {
			q.rebase()
			return true
		}
		if yield {
			runtime.Gosched()
		}
	}
}

// nameSamples names the counts read, once.
func (q *quietness) nameSamples() {
	if q.samples[0].Name == "" {
		q.samples[0].Name = "/sched/goroutines/runnable:goroutines"
		q.samples[1].Name = "/sched/goroutines/running:goroutines"
		q.samples[2].Name = "/sched/goroutines/not-in-go:goroutines"
	}
}

// read reads the runtime's counts once and reports whether they are
// quiet: nothing held, nothing runnable, nothing running but this
// goroutine, and no more goroutines in system calls than when the process
// was last found idle. A reading that saw more in system calls, or was
// slow, makes the quiet ones next unsure.
func (q *quietness) read(held *atomic.Int64) bool {
	t0 := time.Now()
	readCounts(q.samples[:])
	nRunnable, nRunning, nonGo := q.samples[0].Value.Uint64(), q.samples[1].Value.Uint64(), q.samples[2].Value.Uint64()
	if nonGo > q.nonGoBase || time.Since(t0) > slowReading {
		q.unsure = true
	}
	return held.Load() == 0 && nRunnable == 0 && nRunning <= 1 && nonGo <= q.nonGoBase
}

// readings counts the readings of one wait: the quiet ones in a row, and
// the busy ones.
type readings struct{ ok, busy int }

// add counts a reading, and reports whether it is time to decide: after
// three quiet readings in a row, or every slowAfter busy ones (every
// stuckDump while goroutines given up on are in their calls).
func (n *readings) add(quiet, stuck bool) bool {
	if quiet {
		n.ok++
		return n.ok >= 3
	}
	n.ok, n.busy = 0, n.busy+1
	return n.busy%slowAfter == 0 || stuck && n.busy%stuckDump == 0
}

// dump takes a stack dump, counted in the stats; a goroutine held (Hold)
// counts as running.
func (q *quietness) dump(held *atomic.Int64) stackDump {
	d := q.stacks()
	if held.Load() != 0 {
		d.st = running
	}
	q.mu.Lock()
	q.stats.StackChecks++
	q.mu.Unlock()
	return d
}

// patience is when one wait's stack dumps started to find goroutines
// waiting in system calls, and waiting for the runtime (zero: not now).
type patience struct {
	inSyscallSince, inRuntimeSince time.Time
}

// judge says what the stack dump d decides: the process is idle, or
// another reading follows (after letting others run, with yield). A
// goroutine waiting in a system call, or for the runtime, counts as busy
// for syscallPatience of wall time, then is given up on.
func (q *quietness) judge(d stackDump, p *patience) (isIdle, yield bool) {
	if !d.inRuntime {
		p.inRuntimeSince = time.Time{} // the 200 ms are of one stretch
	} else if d.st != running {
		// Busy while the runtime holds a goroutine, but not for
		// ever: a wait of the program's that looks like one (a
		// semaphore parked on without sync's frames) would
		// otherwise stop the clock for good.
		if p.inRuntimeSince.IsZero() {
			p.inRuntimeSince = time.Now()
		}
		if time.Since(p.inRuntimeSince) <= syscallPatience {
			q.unsure = true // quiet readings next are confirmed by a dump
			return false, true
		}
		q.gaveUp()
	}
	switch {
	case d.st == idle:
		return true, false
	case d.st == inSyscall && p.inSyscallSince.IsZero():
		p.inSyscallSince = time.Now()
		return false, false
	case d.st == inSyscall && time.Since(p.inSyscallSince) > syscallPatience:
		q.gaveUp()
		for _, id := range d.waiting {
			q.stuck[id] = true
		}
		return true, false
	}
	return false, true
}

// gaveUp counts a wait given up on.
func (q *quietness) gaveUp() {
	q.mu.Lock()
	q.stats.GaveUp++
	q.mu.Unlock()
}

// rebase, once the process is found idle, takes its goroutines in system
// calls (but those given up on) as the base readings compare with, and
// trusts quiet readings again.
func (q *quietness) rebase() {
	metrics.Read(q.samples[:])
	q.nonGoBase = q.samples[2].Value.Uint64() - min(q.samples[2].Value.Uint64(), uint64(len(q.stuck)))
	q.unsure = false
}

// stackState is what a stack dump says of the goroutines but the caller.
type stackState int

const (
	idle      stackState = iota // every one is blocked
	inSyscall                   // some wait in system calls (waitingCall), none runs
	running                     // some run, are runnable, or work in system calls
)

// stackDump is what a stack dump says of the goroutines but the caller:
// their state, and which of them wait in system calls on the outside world
// without having been given up on yet.
type stackDump struct {
	st      stackState
	waiting []uint64
	// inRuntime: some goroutine waits for the runtime itself (see
	// runtimeWait); it counts as busy for up to syscallPatience.
	inRuntime bool
}

// stacks reads every goroutine's state from a dump of their stacks, and
// forgets the goroutines given up on that have left their calls.
func (q *quietness) stacks() stackDump {
	if q.buf == nil {
		q.buf = make([]byte, 1<<20)
		q.stuck = make(map[uint64]bool)
	}
	var n int
	for {
		n = runtime.Stack(q.buf, true)
		if n < len(q.buf) {
			break
		}
		q.buf = make([]byte, 2*len(q.buf))
	}
	return q.readDump(q.buf[:n])
}

// readDump reads a dump of every goroutine's stack (runtime.Stack), the
// caller's first, and forgets the goroutines given up on that have left
// their calls.
func (q *quietness) readDump(dump []byte) stackDump {
	d := stackDump{st: idle}
	still := make(map[uint64]bool, len(q.stuck))
	// The dump is goroutines separated by blank lines, each a header
	// ("goroutine 7 [select]:") and its frames, the caller first.
	for i, g := range bytes.Split(dump, []byte("\n\n")) {
		header, frames, _ := bytes.Cut(g, []byte("\n"))
		if i == 0 {
			continue
		}
		switch {
		case bytes.Contains(header, []byte("[running")), bytes.Contains(header, []byte("[runnable")):
			d.st = running
		case runtimeWait(header, frames):
			d.inRuntime = true
		case bytes.Contains(header, []byte("[syscall")) && !lifelongWait(frames):
			id := goroutineID(header)
			switch {
			case !waitingCall(frames):
				d.st = running
			case q.stuck[id]:
				still[id] = true
			default:
				d.waiting = append(d.waiting, id)
				d.st = max(d.st, inSyscall)
			}
		}
	}
	q.stuck = still
	return d
}

// lifelongWaits are the first frames of goroutines that wait in a system
// call, as the runtime shows them, for as long as they run, and are never
// the run's work: os/signal's receiver of signals, and runtime/pprof's
// reader of CPU profile samples (go test -cpuprofile, pprof.StartCPUProfile),
// which waits in the runtime for samples between its writes. Counted busy,
// the reader kept time from moving at all: a profiled virtual run timed
// out dialing its flows, at virtual time 0.
var lifelongWaits = [][]byte{
	[]byte("os/signal.signal_recv"), []byte("runtime/pprof.readProfile("),
}

// lifelongWait tells whether a goroutine in a system call, whose stack
// frames are given, is one of lifelongWaits.
func lifelongWait(frames []byte) bool {
	for _, w := range lifelongWaits {
		if bytes.HasPrefix(frames, w) {
			return true
		}
	}
	return false
}

// runtimeWaits are the states of a goroutine the runtime stopped for a
// while on its own (the garbage collector, a preemption, a stop of the
// world) and resumes without anything else happening: not a wait of the
// run's, but its work. A goroutine that allocates while the collector
// marks may wait for it to credit its allocations ("GC assist wait"), one
// that allocates as a collection starts waits for it to start
// ("semacquire", see runtimeWait), and the collector's workers, which
// they wait for, do not appear in a stack dump: counted blocked, such a
// goroutine let time move on before its work of the instant was done (a
// lab flow dialing at 60 µs instead of 0, one run in a few hundred under
// load).
var runtimeWaits = [][]byte{
	[]byte("[GC assist"), []byte("[garbage collection"), []byte("[wait for GC cycle"),
	[]byte("[GC mark termination"), []byte("[GC weak to strong wait"), []byte("[preempted"),
	[]byte("[stopping the world"), []byte("[flushing proc caches"), []byte("[debug call"),
	[]byte("[trace goroutine status"), []byte("[trace proc status"), []byte("[page trace flush"),
}

// runtimeWait tells whether a stack dump's goroutine, of the given header
// ("goroutine 7 [GC assist wait]:") and frames, waits for the runtime
// itself: in one of runtimeWaits, or on one of the runtime's own
// semaphores (a collection starting, a stop of the world), which shows as
// "semacquire" with no frame of a semaphore of the program's (sync's
// runtime_Semacquire and its kin, gVisor's Gate) above the program's
// frame that allocated: the dump leaves out the runtime's frames.
func runtimeWait(header, frames []byte) bool {
	if bytes.Contains(header, []byte("[semacquire")) {
		return !bytes.Contains(frames, []byte("Semacquire")) && !bytes.Contains(frames, []byte("github.com/netjam/netjam/third_party/gvisor/_pkg/sync.(*Gate)"))
	}
	for _, w := range runtimeWaits {
		if bytes.Contains(header, w) {
			return true
		}
	}
	return false
}

// goroutineID reads the number of a stack dump's goroutine header
// ("goroutine 7 [syscall]:").
func goroutineID(header []byte) uint64 {
	f := bytes.Fields(header)
	if len(f) < 2 {
		return 0
	}
	id, _ := strconv.ParseUint(string(f[1]), 10, 64)
	return id
}

// waitCalls are the system calls that wait on the outside world: reads
// and receives (of a pipe, a device, a socket), accepts, polls, waits for
// a child. They name the frame that called the system call, in package
// syscall or golang.org/x/sys/unix.
var waitCalls = [][]byte{
	[]byte("syscall.read("), []byte("syscall.Read("), []byte("unix.read("), []byte("unix.Read("),
	[]byte("recvfrom("), []byte("recvmsg("), []byte("ecvmmsg("), []byte("accept("), []byte("accept4("),
	[]byte("wait4("), []byte("Wait4("), []byte("waitid("), []byte("Waitid("), []byte("EpollWait("), []byte("ppoll("),
	[]byte("unix.Poll("), []byte("Select("), []byte("Pause("),
}

// waitingCall tells whether a goroutine in a system call, whose stack
// frames are given, waits on the outside world. Any other system call (a
// write, a file opened, closed, renamed or synced) is the run's own work,
// however long it takes: on a machine whose disk is busy a write to a log
// or a capture can block for seconds, and time must not move on without
// it (it did, once, in a sweep under CI's load: a flow's next datagram
// landed after the run's end).
func waitingCall(frames []byte) bool {
	for _, c := range waitCalls {
		if bytes.Contains(frames, c) {
			return true
		}
	}
	return false
}

// WithTimeout is context.WithTimeout on clk's time: ctx is cancelled d
// from clk's now, with context.DeadlineExceeded as its cause. On the Real
// clock it is context.WithTimeout itself.
func WithTimeout(ctx context.Context, clk Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := clk.(Real); ok {
		return context.WithTimeout(ctx, d)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	t := clk.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}
