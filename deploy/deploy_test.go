package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestKubernetesJob decodes the Job strictly into the Kubernetes API's own
// types (an unknown or misplaced field, a wrong type, fails), then checks
// what netjam needs of it: an Indexed Job whose NETJAM_SHARDS is its
// completion count, a sweep with --shard auto into a folder per index on
// the volume, a shipped scenario, and a pod without privilege.
func TestKubernetesJob(t *testing.T) {
	b, err := os.ReadFile("kubernetes-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(b, &job); err != nil {
		t.Fatalf("kubernetes-job.yaml is not a valid batch/v1 Job: %v", err)
	}
	if job.APIVersion != "batch/v1" || job.Kind != "Job" {
		t.Errorf("apiVersion %q, kind %q", job.APIVersion, job.Kind)
	}
	spec := job.Spec
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion || spec.Completions == nil {
		t.Fatalf("not an Indexed Job with completions: %+v", spec)
	}
	pod := spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever || len(pod.Containers) != 1 {
		t.Fatalf("pod: restartPolicy %q, %d containers", pod.RestartPolicy, len(pod.Containers))
	}
	c := pod.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["NETJAM_SHARDS"] != strings.TrimSpace(itoa(*spec.Completions)) {
		t.Errorf("NETJAM_SHARDS %q, but completions %d: netjam would cut the sweep into the wrong number of shards", env["NETJAM_SHARDS"], *spec.Completions)
	}
	args := c.Args
	if len(args) < 2 || args[0] != "sweep" || !slices.Contains(args, "auto") || args[slices.Index(args, "auto")-1] != "--shard" {
		t.Errorf("args %q: want netjam sweep SCENARIO --shard auto", args)
	}
	if i := slices.Index(args, "--out"); i < 0 || !strings.Contains(args[i+1], "$(JOB_COMPLETION_INDEX)") {
		t.Errorf("args %q: each shard needs a folder of its own (--out .../$(JOB_COMPLETION_INDEX))", args)
	}
	if scen := strings.TrimPrefix(args[1], "/configs/"); !fileExists(filepath.Join("..", "configs", scen)) {
		t.Errorf("the scenario %s is not one the image ships (configs/)", args[1])
	}
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("the pod must run without privilege: %+v, %+v", psc, sc)
	}
	if c.Resources.Requests.Cpu().String() != "1" {
		t.Errorf("cpu request %v: a real-time run needs a core of its own", c.Resources.Requests.Cpu())
	}
	// netjam never talks to the Kubernetes API: a token mounted in the
	// pod would only be something to steal.
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken: %v, want false", pod.AutomountServiceAccountToken)
	}
	// A pod filling a node's disk through an emptyDir is evicted at
	// its sizeLimit instead.
	for _, v := range pod.Volumes {
		if ed := v.EmptyDir; ed != nil && (ed.SizeLimit == nil || ed.SizeLimit.Sign() <= 0) {
			t.Errorf("volume %s: an emptyDir without a sizeLimit", v.Name)
		}
	}
}

// TestDockerfilePinsItsBaseImages: every image the Dockerfile builds from
// is named by digest, either written out (@sha256:...) or through a
// build argument declared before the first FROM (@${NAME}) whose default,
// if it has one, is a digest. A tag alone may point at other bytes
// tomorrow.
func TestDockerfilePinsItsBaseImages(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	digest := regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	args := map[string]string{} // declared before the first FROM
	stages := map[string]bool{}
	froms := 0
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "ARG":
			if froms == 0 {
				name, def, _ := strings.Cut(f[1], "=")
				args[name] = def
			}
		case "FROM":
			froms++
			image := f[1]
			if strings.HasPrefix(image, "--platform=") && len(f) > 2 {
				image = f[2]
			}
			earlier := stages[image]
			if len(f) >= 4 && strings.EqualFold(f[len(f)-2], "AS") {
				stages[f[len(f)-1]] = true // for the FROMs after this one
			}
			if earlier {
				continue // built here, from pinned images
			}
			_, pin, ok := strings.Cut(image, "@")
			switch {
			case !ok:
				t.Errorf("Dockerfile:%d: FROM %s: not pinned by digest (@sha256:...)", i+1, image)
			case strings.HasPrefix(pin, "${") && strings.HasSuffix(pin, "}"):
				name := pin[2 : len(pin)-1]
				def, declared := args[name]
				if !declared || def != "" && !digest.MatchString(def) {
					t.Errorf("Dockerfile:%d: FROM %s: %s must be an ARG before the first FROM whose default, if any, is a digest (sha256:...), not %q", i+1, image, name, def)
				}
			case !digest.MatchString(pin):
				t.Errorf("Dockerfile:%d: FROM %s: %q is not a digest (sha256: and 64 hex digits)", i+1, image, pin)
			}
		}
	}
	if froms == 0 {
		t.Error("the Dockerfile has no FROM")
	}
}

// TestSlurmScript checks the script's syntax, then runs it as Slurm would
// run task 3 of the array, with a stand-in netjam that prints its
// arguments and the sweep's number of shards. TestSlurmCluster runs it on
// a real Slurm.
func TestSlurmScript(t *testing.T) {
	if out, err := exec.Command("bash", "-n", "slurm-array.sh").CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	bin := t.TempDir()
	os.WriteFile(filepath.Join(bin, "netjam"), []byte("#!/bin/sh\necho \"NETJAM_SHARDS=$NETJAM_SHARDS $*\"\n"), 0o755)
	script, _ := filepath.Abs("slurm-array.sh")
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"configs/sweep-cc-loss.yaml"}, "NETJAM_SHARDS=8 sweep configs/sweep-cc-loss.yaml --shard auto --out results/shard-3 -q\n"},
		{[]string{"NETJAM_SHARDS=4"}, []string{"my.yaml", "--seeds", "2"}, "NETJAM_SHARDS=4 sweep my.yaml --seeds 2 --shard auto --out results/shard-3 -q\n"},
	} {
		cmd := exec.Command("bash", append([]string{script}, c.args...)...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "SLURM_ARRAY_TASK_ID=3", "SLURM_ARRAY_TASK_COUNT=1", "SLURM_ARRAY_TASK_MIN=3")
		cmd.Env = append(cmd.Env, c.env...)
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != c.want {
			t.Errorf("task 3 of %v: %v\n%s", c.env, err, out)
		}
	}
	b, _ := os.ReadFile("slurm-array.sh")
	if !strings.Contains(string(b), "#SBATCH --array=0-7") || !strings.Contains(string(b), "#SBATCH --cpus-per-task=1") ||
		!strings.Contains(string(b), "NETJAM_SHARDS=${NETJAM_SHARDS:-8}") {
		t.Errorf("the script must be an array of one-core tasks, 0 to 7, of a sweep of 8 shards")
	}
	// Slurm opens the output file before the script runs: in a folder
	// that does not exist yet, every task fails (JobLaunchFailure).
	if m := regexp.MustCompile(`(?m)^#SBATCH --output=(\S+)$`).FindStringSubmatch(string(b)); m == nil || strings.Contains(m[1], "/") {
		t.Errorf("#SBATCH --output: %v: the submission folder's own file, not one in a folder the script makes", m)
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
