package impair

import (
	"fmt"
	"sort"
	"time"
)

// Scheduled changes: a Config that takes effect at an exact logical time,
// for a timeline. The chain keeps them in time order beside its packet
// events; Advance applies each when the chain's time reaches it, before any
// packet event of the same instant, so a change at t applies to a packet
// arriving at t and to a serialization starting at t, and not to a packet
// arriving a nanosecond earlier. Next reports the next change as an event,
// so a Runner wakes for it even when the direction is empty.

// MaxScheduled bounds the changes a chain holds pending: a timeline's ramps
// and repeats are compiled into at most this many changes per direction.
const MaxScheduled = 10000

// A Change is a Config to apply at a time.
type Change struct {
	At     time.Time
	Config Config
	// Done, when not nil, is called on the chain's goroutine once the
	// change was applied (err nil) or refused (err says why; the chain
	// then keeps its settings). It must not call back into the chain.
	Done func(at time.Time, err error)
}

// SetAt schedules ch. A change at a time the chain has passed applies at
// the next Advance, at the chain's time. Changes at the same time apply in
// the order scheduled. It must be called where Arrive and Advance are
// (Runner.SetAt is safe from any goroutine). ch.Config is validated now;
// what depends on the chain's state then (Chain.Set) is checked when it
// applies.
func (c *Chain) SetAt(ch Change) error {
	if err := ch.Config.Validate(); err != nil {
		return fmt.Errorf("impair: direction %q: %w", ch.Config.Name, err)
	}
	if len(c.pending) >= MaxScheduled {
		return fmt.Errorf("impair: direction %q: more than %d changes pending", c.name, MaxScheduled)
	}
	i := sort.Search(len(c.pending), func(i int) bool { return c.pending[i].At.After(ch.At) })
	c.pending = append(c.pending, Change{})
	copy(c.pending[i+1:], c.pending[i:])
	c.pending[i] = ch
	return nil
}

// Pending returns how many scheduled changes have not applied yet.
func (c *Chain) Pending() int { return len(c.pending) }

// applyNext applies the first pending change.
func (c *Chain) applyNext() {
	ch := c.pending[0]
	c.pending[0] = Change{}
	c.pending = c.pending[1:]
	if len(c.pending) == 0 {
		c.pending = nil // let the backing array go
	}
	at := ch.At
	if at.Before(c.now) {
		at = c.now
	}
	c.now = at
	err := c.Set(ch.Config)
	if ch.Done != nil {
		ch.Done(at, err)
	}
}

// SetAt schedules ch on the direction (see Chain.SetAt); it may be called
// from any goroutine, before Start or while the Runner runs.
func (r *Runner) SetAt(ch Change) error {
	return r.onLoop(func(bool) error { return r.chain.SetAt(ch) })
}
