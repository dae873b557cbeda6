package hostnet

// RootlessInitArg is the hidden first argument of netjam started as the
// first process of a rootless shell's namespaces: main then calls
// RootlessInit and nothing else. rootlessInitEnv carries its
// configuration.
const (
	RootlessInitArg = "__netjam-shell-ns"
	rootlessInitEnv = "NETJAM_SHELL_NS"
)

// Exit statuses of RootlessInit, which returns only on failure.
const (
	RootlessFailed = 1   // the namespace or the device could not be set up, or netjam went away
	RootlessNoExec = 127 // the command could not be executed
)
