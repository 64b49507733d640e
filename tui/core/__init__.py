"""The ground floor: text and path boundaries, safe writes, errors, liveness, and the typed
events with their readers. Imports nothing else of tui."""
