"""Cairn benchmark harness: runs the user workloads from the seed threads on
Cairn, GlusterFS, MooseFS and the local disk, side by side on one machine."""
