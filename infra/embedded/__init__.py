"""Embedded infrastructure: Postgres and NATS from pip wheels, run as supervised children."""
