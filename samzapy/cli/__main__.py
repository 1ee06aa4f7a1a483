"""``python -m samzapy.cli``: the ``samzapy`` command."""

from samzapy.cli import run

if __name__ == "__main__":
    run()
