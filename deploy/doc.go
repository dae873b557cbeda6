// Package deploy holds what runs netjam on a batch engine: a Dockerfile, a
// Kubernetes Indexed Job and a Slurm job array for sweeps (see README.md
// here). Its tests check the manifest against the Kubernetes API's types,
// the script's use of netjam's flags, and that the Dockerfile names its
// base images by digest.
package deploy
