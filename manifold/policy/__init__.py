"""Who may see and change what, and the name patterns those rules use: plain rules with
no state, below every service that applies them (the meta service, the file tree)."""
