"""The PRC control plane: progress in (workload events, NVML, replayed
traces), inference of each process's lag and the job's critical path,
a policy, and per-process weights, floors and caps out through the
dataplane's hook map. No command line here: cli/ holds every command."""
