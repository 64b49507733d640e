"""What the operator gave that fleetperf refuses: one line naming the file and the field,
the host or the option; the command line prints it and exits 2, the app shows it. Bugs
raise anything else (and keep their traceback)."""


class UserInputError(Exception):
    """Bad input the operator fixes; its message is the whole story."""


class CatalogError(UserInputError):
    """A missing or malformed case, config or override (cases/)."""


class InventoryError(UserInputError):
    """An inventory that cannot be read, or that has no hosts a config fits."""


class StoreError(UserInputError):
    """The results file cannot be used (not a store, or written by a newer fleetperf)."""


class UsageError(UserInputError):
    """A command line that asks for something that is not there (a run, a store, a path)."""
