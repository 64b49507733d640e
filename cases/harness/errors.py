"""The harness's one error type for bad input, below every other harness module (standard
library only, so that the device layer, case.yaml's reader and prepare_main can raise it
without importing the workload's entry point)."""


class InputError(Exception):
    """Bad input to a workload or a prepare step (a missing data path, an unreadable config,
    an unsupported setting): reported in one line naming the file, exit code 2."""

    exit_code = 2
