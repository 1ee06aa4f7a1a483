"""The `samzapy` command: argument parsing, logging set-up, signals and exit codes."""
