"""A private network namespace with a veth pair whose both ends live inside
it, for daemons that refuse loopback addresses (MooseFS chunkservers,
GlusterFS bricks). Nothing outside the namespace gets an address or route.

Processes are started in it with `nsenter --net=...` (network namespace
only), so FUSE mounts made by clients running there stay visible to the
rest of the machine."""

import os

from cairnbench import util


class NetNS:
    def __init__(self, name, subnet):
        """subnet like "10.77.0": the ends get .1 and .2 (/24)."""
        self.name = name
        self.addr1 = f"{subnet}.1"
        self.addr2 = f"{subnet}.2"
        self.path = f"/run/netns/{name}"
        self.created = False

    def prefix(self):
        return ["nsenter", f"--net={self.path}"]

    def _ip(self, *args, check=True):
        return util.run(["ip", "netns", "exec", self.name, "ip"] + list(args),
                        timeout=30, check=check, what="ip " + " ".join(args))

    def create(self):
        self.delete()
        util.run(["ip", "netns", "add", self.name], timeout=30,
                 what="ip netns add")
        self.created = True
        a, b = f"{self.name[:8]}a", f"{self.name[:8]}b"
        self._ip("link", "set", "lo", "up")
        # Created inside the namespace: the host never sees these links.
        self._ip("link", "add", a, "type", "veth", "peer", "name", b)
        self._ip("addr", "add", f"{self.addr1}/24", "dev", a)
        self._ip("addr", "add", f"{self.addr2}/24", "dev", b)
        self._ip("link", "set", a, "up")
        self._ip("link", "set", b, "up")

    def delete(self):
        if os.path.exists(self.path):
            util.run(["ip", "netns", "delete", self.name], timeout=30,
                     check=False)
        self.created = False
