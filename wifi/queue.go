package wifi

import "github.com/netjam/netjam/impair"

// entry is one frame waiting in a queue.
type entry struct {
	p     *impair.Packet // nil for the synthetic frames of a saturated station
	enq   int64          // when it was queued (ns since the medium's epoch)
	size  int32          // IP packet bytes
	tries int32          // failed transmissions so far
}

// ring is a bounded FIFO of entries. Its buffer grows by doubling up to
// the limit, so a queue holds memory in proportion to the largest backlog
// it has seen, and nothing is allocated once that is reached.
type ring struct {
	buf   []entry
	head  int
	n     int
	limit int
}

func (r *ring) full() bool { return r.n >= r.limit }

// at returns the i-th entry from the head (0 <= i < n).
func (r *ring) at(i int) *entry {
	j := r.head + i
	if j >= len(r.buf) {
		j -= len(r.buf)
	}
	return &r.buf[j]
}

// push appends e; the caller has checked full.
func (r *ring) push(e entry) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.n++
	*r.at(r.n - 1) = e
}

func (r *ring) grow() {
	size := min(max(2*len(r.buf), 8), r.limit)
	nb := make([]entry, size)
	for i := range r.n {
		nb[i] = *r.at(i)
	}
	r.buf, r.head = nb, 0
}

// pop removes and returns the head entry (n > 0).
func (r *ring) pop() entry {
	e := r.buf[r.head]
	r.buf[r.head] = entry{}
	r.head++
	if r.head == len(r.buf) {
		r.head = 0
	}
	r.n--
	return e
}

// retain keeps, of the first k entries, those whose keep flag is set, in
// their order, ahead of the rest of the queue: what remains of an A-MPDU
// after its BlockAck. It returns how many entries it removed.
func (r *ring) retain(k int, keep []bool) int {
	w := k - 1
	for i := k - 1; i >= 0; i-- {
		if keep[i] {
			if w != i {
				*r.at(w) = *r.at(i)
			}
			w--
		}
	}
	removed := w + 1
	for range removed {
		r.pop()
	}
	return removed
}
