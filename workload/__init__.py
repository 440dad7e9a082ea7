"""Hybrid-parallel training traffic: ranks as processes that own QPs,
compute phases as timers, collectives posted as messages whose steps wait
on real completions. The layer knows nothing of the live dataplane: it
drives any Transport (the live emulator's, the simulator's), so both run
the same schedules."""
