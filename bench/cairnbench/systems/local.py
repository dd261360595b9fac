"""The local disk: a plain directory on the file system holding the bricks,
and "local x3": the same work done three times, one after the other, the
physical cost of keeping three replicas on one disk."""

import os

from cairnbench.systems.base import System


class LocalSystem(System):
    key = "local"
    label = "local disk"

    def setup(self):
        os.makedirs(self.root, exist_ok=True)
        self.reset()

    def targets(self):
        return [os.path.join(self.root, f"t{i}") for i in range(self.ntargets)]

    def teardown(self):
        from cairnbench import util
        try:
            util.rmtree(self.root, timeout=self.ctx.prepare_timeout)
        except Exception as e:  # noqa: BLE001 - teardown never raises
            util.log(f"{self.key}: teardown: {e}")

    def describe(self):
        return {"label": self.label, "path": self.root}


class LocalX3System(LocalSystem):
    key = "local-x3"
    label = "local disk x3"
    ntargets = 3
