"""System adapters. Each adapter brings one file system up, hands out empty
target directories, makes caches cold on request, and tears itself down."""

from cairnbench.systems.base import System, Unavailable  # noqa: F401


def registry():
    from cairnbench.systems.local import LocalSystem, LocalX3System
    from cairnbench.systems.gluster import GlusterSystem
    from cairnbench.systems.moosefs import MooseFSSystem
    from cairnbench.systems.cairn import CairnSystem
    return {
        "local": LocalSystem,
        "local-x3": LocalX3System,
        "cairn": CairnSystem,
        "glusterfs": lambda ctx: GlusterSystem(ctx, arbiter=False),
        "glusterfs-arbiter": lambda ctx: GlusterSystem(ctx, arbiter=True),
        "moosefs": MooseFSSystem,
    }


DEFAULT_SYSTEMS = ["local", "local-x3", "cairn", "glusterfs",
                   "glusterfs-arbiter", "moosefs"]
