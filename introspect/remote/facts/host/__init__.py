"""Facts about the host: interpreter, packages, engines, GPUs, disk, the serving endpoint."""
