"""Remote tasks: one module per wire task, each with ``run(request) -> reply`` (see runner.TASKS)."""
