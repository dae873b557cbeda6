package sweep

import (
	"strings"
	"testing"
)

// TestAutoShard: --shard auto's shard is the task's index and the number
// of shards NETJAM_SHARDS, whatever the submission's count of tasks: a
// Slurm task submitted again alone ran the whole sweep as shard 0 of 1
// (ID - MIN of COUNT), a strided array (--array=0-7:2) failed, a listed one
// from 1 ran shard 2 into the folder of shard 3.
func TestAutoShard(t *testing.T) {
	for _, c := range []struct {
		env          string // NAME=VALUE ...
		shard, of    int
		batch, error string
	}{
		{env: "SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_COUNT=1 SLURM_ARRAY_TASK_MIN=5 NETJAM_SHARDS=8", shard: 5, of: 8, batch: "slurm"},
		{env: "SLURM_ARRAY_TASK_ID=6 SLURM_ARRAY_TASK_COUNT=4 SLURM_ARRAY_TASK_MIN=0 NETJAM_SHARDS=8", shard: 6, of: 8, batch: "slurm"},
		{env: "SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_MIN=1 NETJAM_SHARDS=8", shard: 3, of: 8, batch: "slurm"},
		{env: "SLURM_ARRAY_TASK_ID=0 NETJAM_SHARDS=1", shard: 0, of: 1, batch: "slurm"},
		{env: "JOB_COMPLETION_INDEX=2 NETJAM_SHARDS=4", shard: 2, of: 4, batch: "kubernetes"},
		{env: "JOB_COMPLETION_INDEX=2 JOB_COMPLETIONS=4", shard: 2, of: 4, batch: "kubernetes"}, // older manifests
		{env: "SLURM_ARRAY_TASK_ID=8 SLURM_ARRAY_TASK_COUNT=8 NETJAM_SHARDS=8",
			error: "--shard auto: SLURM_ARRAY_TASK_ID is 8, but the sweep's shards are 0 to 7 (NETJAM_SHARDS=8): a task's index is its shard, so submit indexes 0 to 7 only (sbatch --array=0-7, or some of them)"},
		{env: "JOB_COMPLETION_INDEX=4 NETJAM_SHARDS=4",
			error: "--shard auto: JOB_COMPLETION_INDEX is 4, but the sweep's shards are 0 to 3 (NETJAM_SHARDS=4): a task's index is its shard, so the Job's completions must be 4"},
		{env: "SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_COUNT=8",
			error: "--shard auto: SLURM_ARRAY_TASK_ID is 3, but NETJAM_SHARDS, the sweep's number of shards, is not set: set it in the task's environment (deploy/ does); the array's own count of tasks is not the sweep's (a task submitted again is an array of one)"},
		{env: "SLURM_ARRAY_TASK_ID=3 NETJAM_SHARDS=eight", error: `--shard auto: NETJAM_SHARDS is "eight", not a number`},
		{env: "SLURM_ARRAY_TASK_ID=x NETJAM_SHARDS=8", error: `--shard auto: SLURM_ARRAY_TASK_ID is "x", not a number`},
		{env: "SLURM_ARRAY_TASK_ID=0 NETJAM_SHARDS=0", error: "--shard auto: NETJAM_SHARDS=0: a sweep has 1 shard or more"},
		{env: "JOB_COMPLETION_INDEX=2", error: "--shard auto: JOB_COMPLETION_INDEX is 2, but NETJAM_SHARDS, the sweep's number of shards, is not set"},
		{env: "NETJAM_SHARDS=8", error: "--shard auto: neither JOB_COMPLETION_INDEX (Kubernetes Indexed Job) nor SLURM_ARRAY_TASK_ID (Slurm job array) is set"},
	} {
		env := map[string]string{}
		for _, kv := range strings.Fields(c.env) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		s, err := autoShard(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		switch {
		case c.error != "" && (err == nil || !strings.HasPrefix(err.Error(), c.error)):
			t.Errorf("%s: %v, want %s", c.env, err, c.error)
		case c.error == "" && (err != nil || s.I != c.shard || s.N != c.of || s.Batch != c.batch):
			t.Errorf("%s: shard %d/%d of %q, %v; want %d/%d of %s", c.env, s.I, s.N, s.Batch, err, c.shard, c.of, c.batch)
		}
	}
}

// TestParseShard: --shard I/N holds the runs whose index is I modulo N;
// a shard that does not exist, or text that is not I/N, is refused.
func TestParseShard(t *testing.T) {
	s, err := ParseShard("1/3")
	if err != nil || s != (Shard{I: 1, N: 3}) || !s.Has(4) || s.Has(3) || s.Name() != "1/3" {
		t.Errorf("1/3: %+v %v", s, err)
	}
	if s, err := ParseShard(""); err != nil || !s.Has(7) || s.Name() != "" {
		t.Errorf("no --shard: %+v %v, want the whole sweep", s, err)
	}
	for in, want := range map[string]string{
		"3/3": "--shard: shard 3 of 3 does not exist (shards count from 0 to N-1)",
		"0/0": "--shard: shard 0 of 0 does not exist (shards count from 0 to N-1)",
		"1-3": `--shard: "1-3" is not I/N or auto`,
	} {
		if _, err := ParseShard(in); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", in, err, want)
		}
	}
}
