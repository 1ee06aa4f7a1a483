"""Example task packages for samzapy."""
