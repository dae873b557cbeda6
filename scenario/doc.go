// Package scenario loads netjam scenario files: it decodes the YAML,
// applies the overrides of variants and of the command line, checks
// everything, and returns one fully resolved Scenario per run.
//
// A scenario is handled as a yaml.Node tree until it is decoded. Overrides
// ("--set link.loss=1%", a variant's set) are applied to the tree, so they
// are checked by the same strict decoder as the file, and every node keeps
// its line: errors name the file, the line, the dotted key path and what was
// expected, and all of them are reported at once (see Error).
//
// NewLink makes the Scenario of one link from Go values (package netjam's
// Link) without a file: it checks them with the decoder's ranges and
// messages, fills the decoder's defaults, and writes the tree a file of
// the same scenario has, so that overrides apply to it as to a file's.
//
// A Scenario describes a run; the emulator builds its running objects from
// a validated one. What configures a package of the path is decoded into
// that package's own type (each direction of the link into impair.Config,
// the Wi-Fi cell into wifi.Config, a flow into flows.TCPBulkSpec or
// flows.UDPSpec and hostcfg.TCPOptions, the TUN device into
// hostnet.TUNConfig and its relay into hostcfg.RelayConfig); scenario keeps
// what is YAML's: keys, units, lines, "did you mean". schema.go holds the
// scenario's own types, in the order of the reference, and the keys of
// every mapping.
//
// The file format is described in docs/scenario.md and shown, most keys
// with their alternatives, in configs/reference.yaml.
package scenario
