"""A fleet of SSH (and Slurm) test hosts on this machine, for trying fleetperf and its tests.
Apart from the engine: nothing here is imported by it."""
