package emulator

import (
	"github.com/netjam/netjam/impair"
)

// directionConfig names and seeds a direction of a validated scenario,
// which package scenario decodes straight into impair's Config. Validate
// guards impair's own invariants; scenario has checked every value.
func directionConfig(name string, seed uint64, c impair.Config) (impair.Config, error) {
	c.Name, c.Seed = name, seed
	return c, c.Validate()
}
