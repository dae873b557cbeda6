package sweep

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// folderPlan is one folder's sweep-plan.json, as written, and where it is.
type folderPlan struct {
	dir  string
	plan Plan
}

// shardOf returns the shard index of a plan's "I/N", -1 for a whole sweep.
func (f folderPlan) shardOf() int {
	i, _, ok := parsePlanShard(f.plan.Shard)
	if !ok {
		return -1
	}
	return i
}

// shardsMissingRuns groups the missing runs of res by the shard of
// res.Shards that holds them (the run of index i is shard i modulo N's),
// each with the folder it was found in and its batch engine; the shards
// in order. None unless every folder is a shard of one N.
func shardsMissingRuns(res Result, folders []folderPlan) []ShardMissing {
	n := res.Shards
	if n == 0 || len(res.Missing) == 0 {
		return nil
	}
	byShard := map[int]folderPlan{}
	for _, f := range folders {
		byShard[f.shardOf()] = f
	}
	others := firstShard(folders).plan.Batch
	var out []ShardMissing
	at := map[int]int{} // shard -> its place in out
	for _, m := range res.Missing {
		for i := m.First; i <= m.Last; i++ {
			s := i % n
			k, ok := at[s]
			if !ok {
				k = len(out)
				at[s] = k
				sm := ShardMissing{Shard: s, Batch: others}
				if f, found := byShard[s]; found {
					sm.Folder, sm.Batch = f.dir, f.plan.Batch
				}
				out = append(out, sm)
			}
			out[k].Runs = append(out[k].Runs, i)
		}
	}
	slices.SortFunc(out, func(a, b ShardMissing) int { return a.Shard - b.Shard })
	return out
}

// firstShard returns the folder of the lowest shard, which stands for the
// sweep's shards whose folders were not merged.
func firstShard(folders []folderPlan) folderPlan {
	return slices.MinFunc(folders, func(a, b folderPlan) int { return a.shardOf() - b.shardOf() })
}

// rerun returns the shell commands that run the missing runs of res
// again: for a whole sweep, the sweep again in its folder (finished runs
// are not run again); for shards run by a Slurm array, one sbatch of
// deploy/slurm-array.sh with the tasks that hold them (a task's index is
// its shard); for other shards, netjam sweep of each shard into its
// folder. Each starts with a cd to the working directory the sweep ran
// in, where its relative paths are. None when a folder's plan does not
// say how it was started (written by an older netjam), or the folders are
// not a whole sweep or shards of one N, or a command would hold a control
// character.
func rerun(res Result, folders []folderPlan) []string {
	if res.MissingCount() == 0 || len(folders) == 0 {
		return nil
	}
	if res.Shards == 0 {
		p := folders[0].plan
		if len(folders) != 1 || p.Shard != "" || len(p.Args) == 0 {
			return nil
		}
		return printable([]string{inDir(p.Dir, command("netjam", append(append([]string{"sweep"}, p.Args...), "--out", p.Out)...))})
	}
	byShard := map[int]folderPlan{}
	for _, f := range folders {
		byShard[f.shardOf()] = f
	}
	first := firstShard(folders)
	var cmds []string
	// One sbatch for the tasks of one working directory and arguments.
	type submit struct{ dir, script string }
	slurm := map[submit][]int{}
	var slurmOrder []submit
	for _, m := range res.ShardsMissingRuns {
		f, found := byShard[m.Shard]
		if !found {
			f = first
		}
		p := f.plan
		if len(p.Args) == 0 {
			return nil
		}
		switch p.Batch {
		case "slurm":
			// The script's array index is the shard, and its folder
			// results/shard-INDEX in the folder it was submitted from.
			key := submit{p.Dir, command("deploy/slurm-array.sh", p.Args...)}
			if _, ok := slurm[key]; !ok {
				slurmOrder = append(slurmOrder, key)
			}
			slurm[key] = append(slurm[key], m.Shard)
		default:
			out := p.Out
			if !found {
				out = shardFolder(first, m.Shard)
			}
			args := append(append([]string{"sweep"}, p.Args...), "--shard", fmt.Sprintf("%d/%d", m.Shard, res.Shards), "--out", out)
			dir := p.Dir
			if p.Batch == "kubernetes" {
				dir = "" // the pod's: run it in a pod with the results' volume
			}
			cmds = append(cmds, inDir(dir, command("netjam", args...)))
		}
	}
	for _, k := range slurmOrder {
		cmds = append(cmds, inDir(k.dir, fmt.Sprintf("NETJAM_SHARDS=%d sbatch --array=%s %s", res.Shards, arrayList(slurm[k]), k.script)))
	}
	return printable(cmds)
}

// printable returns cmds, or none if one holds a control character: the
// plans merged may come from anywhere, and a command shown on a terminal,
// to be copied, must read as what it runs (a carriage return or an escape
// sequence could show another).
func printable(cmds []string) []string {
	for _, c := range cmds {
		if strings.IndexFunc(c, unicode.IsControl) >= 0 {
			return nil
		}
	}
	return cmds
}

// shardFolder guesses the folder of shard i from the folder of another
// shard, f: its name with f's index at its end replaced (results/shard-3
// for shard 3 from results/shard-0, as deploy/ names them), else a folder
// shard-I beside it.
func shardFolder(f folderPlan, i int) string {
	own := strconv.Itoa(f.shardOf())
	if head, ok := strings.CutSuffix(f.plan.Out, own); ok && (head == "" || !isDigit(head[len(head)-1])) {
		return head + strconv.Itoa(i)
	}
	return filepath.Join(filepath.Dir(f.plan.Out), "shard-"+strconv.Itoa(i))
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// arrayList writes sorted indexes as a Slurm --array list: "1-3,5".
func arrayList(idx []int) string {
	var parts []string
	for j := 0; j < len(idx); {
		k := j
		for k+1 < len(idx) && idx[k+1] == idx[k]+1 {
			k++
		}
		if k > j {
			parts = append(parts, fmt.Sprintf("%d-%d", idx[j], idx[k]))
		} else {
			parts = append(parts, strconv.Itoa(idx[j]))
		}
		j = k + 1
	}
	return strings.Join(parts, ",")
}

// inDir prefixes cmd with a cd to dir, unless dir is "".
func inDir(dir, cmd string) string {
	if dir == "" {
		return cmd
	}
	return "cd " + shellQuote(dir) + " && " + cmd
}

// command writes name and args as a POSIX shell command line.
func command(name string, args ...string) string {
	words := []string{shellQuote(name)}
	for _, a := range args {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

// shellSafe are the words a POSIX shell reads as they are written.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote writes s as one word for a POSIX shell: as it is when that
// is safe, else in single quotes, each ' in it written '\”.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
