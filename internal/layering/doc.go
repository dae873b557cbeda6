// Package layering holds no code: its test checks netjam's import rules
// (imports point down, gVisor stays out of the packages that must not
// need it, the command line links it only through the emulator and the
// proxy and does not reach below the emulator, a sweep does not reach
// the emulator), reading what go list reports of every package of the
// module.
package layering
