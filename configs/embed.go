// Package configs holds netjam's example scenarios. Every file here is
// validated by the tests, and the default scenario is embedded in the
// binary so that `netjam run` works with no file at hand.
package configs

import _ "embed"

// DefaultName is the path of the embedded default scenario, as reported in
// messages.
const DefaultName = "configs/tcp-vs-udp-loss.yaml"

// Default is the content of the default scenario.
//
//go:embed tcp-vs-udp-loss.yaml
var Default []byte
