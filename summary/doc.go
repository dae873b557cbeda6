// Package summary is what a run reports: the types of summary.json
// (Summary, and each run's flows, links, paths, hosts, TUN device, nodes,
// routers, expectations and timeline in it), and the changes a live run
// answers with. The emulator fills them; the report, a sweep's merge and
// the control API read them, each without linking the emulator (which
// links gVisor): internal/layering keeps this package free of it.
//
// A field's JSON name is the file's format, which scripts, older reports
// and sweeps read: schema_test.go pins every name and type
// (testdata/schema.txt), so that a rename is a decision, not an accident.
package summary
