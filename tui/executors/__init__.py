"""How a planned run reaches hosts and comes back: one executor per kind, over Ansible."""
