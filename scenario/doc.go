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
// The types here describe a run; they are not the emulator's running
// objects, which are built from a validated Scenario.
//
// The file format is described in the README's "Scenario reference" and
// shown, every key with its alternatives, in configs/reference.yaml.
package scenario
