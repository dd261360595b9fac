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
        "cairn-dr": lambda ctx: CairnSystem(ctx, sets=2),
        # the same replica 3 volume with a quota limit on the target
        "cairn-quota": lambda ctx: CairnSystem(ctx, quota=True),
        # TLS 1.3 between clients and bricks (issue 47's comparison)
        "cairn-tls": lambda ctx: CairnSystem(ctx, tls=True),
        "glusterfs": lambda ctx: GlusterSystem(ctx, arbiter=False),
        "glusterfs-tls": lambda ctx: GlusterSystem(ctx, tls=True),
        "glusterfs-arbiter": lambda ctx: GlusterSystem(ctx, arbiter=True),
        "glusterfs-dr": lambda ctx: GlusterSystem(ctx, sets=2),
        # seed 003's VM image store: 2 x (2 + 1) dispersed with sharding
        "glusterfs-ec": lambda ctx: GlusterSystem(ctx, sets=2, disperse=True),
        "cairn-ec": lambda ctx: CairnSystem(ctx, sets=2, disperse=True),
        "moosefs": MooseFSSystem,
        # one server of three dead (bench/run --degraded adds these)
        "cairn-down": lambda ctx: CairnSystem(ctx, down=True),
        "cairn-dr-down": lambda ctx: CairnSystem(ctx, sets=2, down=True),
        "glusterfs-down": lambda ctx: GlusterSystem(ctx, down=True),
        "glusterfs-arbiter-down": lambda ctx: GlusterSystem(ctx, arbiter=True, down=True),
        "glusterfs-dr-down": lambda ctx: GlusterSystem(ctx, sets=2, down=True),
    }


DEFAULT_SYSTEMS = ["local", "local-x3", "cairn", "glusterfs",
                   "glusterfs-arbiter", "moosefs"]
# Not run by default (ask with --systems): 2 x 3 distributed-replicate
# volumes, compared with each other; Cairn with directory quota on its
# target, compared with cairn; TLS between clients and bricks; seed 003's
# dispersed, sharded VM image store.
EXTRA_SYSTEMS = ["cairn-dr", "glusterfs-dr", "cairn-quota", "cairn-tls", "glusterfs-tls",
                 "cairn-ec", "glusterfs-ec"]
# The "-down" variant of each system that has servers: with --degraded,
# each runs right after its system, in the same run, for side-by-side ratios.
DOWN_VARIANTS = {s: s + "-down" for s in
                 ("cairn", "cairn-dr", "glusterfs", "glusterfs-arbiter", "glusterfs-dr")}
