"""Fleet qualification (issue 42): each host, device and link judged against its peers.

judge.py and schedule.py are pure (no I/O, standard library only); run.py orchestrates,
output.py prints."""
