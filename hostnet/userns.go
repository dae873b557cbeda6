package hostnet

import "io"

// RootlessInitArg is the hidden first argument of netjam started as the
// first process of a rootless shell's namespaces: main then calls
// RootlessInit and nothing else. rootlessInitEnv carries its
// configuration.
const (
	RootlessInitArg = "__netjam-shell-ns"
	rootlessInitEnv = "NETJAM_SHELL_NS"
)

// RootlessCommand is what the first process of a rootless shell's (or
// node's) namespaces becomes: Args, with Env added to netjam's
// environment, in Dir ("": netjam's), its standard streams those given
// (nil: none). No Args: the process holds the namespaces until netjam
// ends (a node without a command).
type RootlessCommand struct {
	Args           []string
	Env            []string
	Dir            string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Exit statuses of RootlessInit, which returns only on failure.
const (
	RootlessFailed = 1   // the namespace or the device could not be set up, or netjam went away
	RootlessNoExec = 127 // the command could not be executed
)
