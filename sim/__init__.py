"""The fluid simulator: the same scenarios, CC core, workload schedules and
policies as the live testbed, at datacenter scale (docs/sim.md)."""
