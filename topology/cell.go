package topology

import (
	"fmt"
	"strconv"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/wifi"
)

// Cell is a Wi-Fi cell (a wifi.Runner: the shared medium on a goroutine
// of its own) as four kinds of node, its stations found by name:
//   - Uplink(name): what station name sends to the AP;
//   - Downlink(name): what the AP sends to station name;
//   - AP(): what reached the AP (a source);
//   - Station(name): what reached station name (a source).
//
// The medium takes MTU-sized packets, one frame each, so the builder
// splits GSO packets in front of it.
type Cell struct {
	r     *wifi.Runner
	names map[string]int // station name to its index in the medium
	up    Port
	down  []Port
}

// NewCell builds the cell cfg describes, on clk.
func NewCell(cfg wifi.Config, clk clock.Clock) (*Cell, error) {
	c := &Cell{names: map[string]int{}, down: make([]Port, len(cfg.Stations))}
	for i, s := range cfg.Stations {
		name := s.Name
		if name == "" {
			name = "sta" + strconv.Itoa(i)
		}
		c.names[name] = i
	}
	r, err := wifi.NewRunner(cfg, clk,
		func(now time.Time, p *impair.Packet, _ int) { c.up.Push(now, p) },
		func(now time.Time, p *impair.Packet, i int) { c.down[i].Push(now, p) })
	if err != nil {
		return nil, err
	}
	c.r = r
	return c, nil
}

// Runner returns the cell's runner: its statistics.
func (c *Cell) Runner() *wifi.Runner { return c.r }

// Has reports whether the cell has a station name.
func (c *Cell) Has(name string) bool {
	_, ok := c.names[name]
	return ok
}

// station returns the index of station name; it panics on a name the
// cell does not have, a bug of the caller (see Has).
func (c *Cell) station(name string) int {
	i, ok := c.names[name]
	if !ok {
		panic(fmt.Sprintf("topology: the cell has no station %q", name))
	}
	return i
}

var medium = Accepts{GSO: No, Partial: true}

// Uplink returns the node taking what station name sends to the AP.
func (c *Cell) Uplink(name string) Node {
	return Node{Name: "cell/" + name + "/up", In: &cellIn{c.r, c.station(name), false}, Accepts: medium, Life: c.r}
}

// Downlink returns the node taking what the AP sends to station name.
func (c *Cell) Downlink(name string) Node {
	return Node{Name: "cell/" + name + "/down", In: &cellIn{c.r, c.station(name), true}, Accepts: medium, Life: c.r}
}

// AP returns the node forwarding what reached the AP. What leaves the
// cell may have a partial checksum (as it entered); never a GSO packet.
func (c *Cell) AP() Node {
	return Node{Name: "cell/ap", Out: &c.up, Emits: Emits{Partial: true}, Life: c.r}
}

// Station returns the node forwarding what reached station name.
func (c *Cell) Station(name string) Node {
	return Node{Name: "cell/" + name, Out: &c.down[c.station(name)], Emits: Emits{Partial: true}, Life: c.r}
}

// cellIn puts packets onto the medium for one station, one way.
type cellIn struct {
	r        *wifi.Runner
	station  int
	downlink bool
}

func (s *cellIn) Push(_ time.Time, p *impair.Packet) { s.r.Send(p, s.station, s.downlink) }
