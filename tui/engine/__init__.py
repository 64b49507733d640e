"""The engine: plans runs on an inventory's hosts, executes them, records and stores them.
Front ends (batch, app, cli) reach everything through its Session."""
