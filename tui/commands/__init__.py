"""The subcommands of ``fleetperf``, one module each: its arguments, what it runs and what it
prints (tui/cli.py holds the parser, the global options and the dispatch)."""
