"""Serving: engines, GPUs, the memory and parallelism plan, the drafter plan."""
