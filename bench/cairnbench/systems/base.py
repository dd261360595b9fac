"""Base class of the system adapters."""

import os

from cairnbench import util


class Unavailable(Exception):
    """The system cannot be benchmarked on this machine (reason in str)."""


class System:
    key = "base"
    label = "base"
    packages = ()        # Debian packages the adapter needs
    ntargets = 1         # local-x3 does the work three times
    # "-down" variants (bench/run --degraded): one server of three is dead
    # for every workload, as seed 004's users had it.
    down = False

    def __init__(self, ctx):
        self.ctx = ctx
        self.root = os.path.join(ctx.workdir, "systems", self.key)

    # -- lifecycle ------------------------------------------------------
    def setup(self):
        """Bring the system up. Raise Unavailable with a reason if it
        cannot work here."""

    def teardown(self):
        """Undo setup completely. Must never raise and must be safe to call
        more than once and after a partial setup."""

    def reset(self):
        """Give the next run empty target directories."""
        for t in self.targets():
            util.rmtree(t, timeout=self.ctx.prepare_timeout)
            os.makedirs(t)

    def take_server_down(self):
        """For a "-down" variant: kill -9 what runs on one server of the
        three (its management daemon, bricks and self-heal daemon), once
        the volume is up and after every reset that makes a new one. Must
        be safe to call when that server is already down."""
        raise Unavailable("has no servers to take down")

    def make_cold(self):
        """Drop every cache between the workload and the disk."""
        util.drop_caches()

    # -- what workloads use ----------------------------------------------
    def targets(self):
        """Directories the workload operates in (one per replica of the
        work; all empty after reset())."""
        raise NotImplementedError

    def prefix(self):
        """argv prefix for workload commands (e.g. enter a namespace)."""
        return []

    def second_client(self):
        """Mount the file system once more, as another client would (the
        shared-dir workload lists directories through it), and return a
        function that maps a target to the same directory seen through
        that mount. A local directory has no other client: another process
        lists the target itself. end_second_client() undoes it."""
        return lambda t: t

    def end_second_client(self):
        """Undo second_client(); safe to call when it did not run."""

    def client_pids(self):
        """PIDs of the processes that serve the mount (none for a local
        directory); their peak resident memory is measured."""
        return []

    def describe(self):
        """Details recorded in the JSON results."""
        return {"label": self.label}


class SecondMount:
    """second_client() for a system mounted through self._mount(mnt): a
    second mount of the same volume beside self.mnt (named apart from it:
    client_pids() matches self.mnt)."""

    def second_client(self):
        self._mount(self._lister_mnt())
        return lambda t: os.path.join(self._lister_mnt(), os.path.relpath(t, self.mnt))

    def end_second_client(self):
        util.unmount(self._lister_mnt())

    def _lister_mnt(self):
        return os.path.join(self.root, "lister")
