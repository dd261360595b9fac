"""MooseFS 3.0 (Debian's moosefs-* 3.0.117): one master, three chunkservers
each with its own config, data directory and port, goal 3, mounted with
mfsmount.

Chunkservers refuse a master on a loopback address, so every MooseFS daemon
and the client run in a private network namespace (master on 10.77.0.1,
chunkservers on 10.77.0.2 ports 9422-9424), entered with nsenter so that
the FUSE mount stays visible; workloads run in that namespace too."""

import os
import shutil
import time

from cairnbench import util
from cairnbench.netns import NetNS
from cairnbench.systems.base import SecondMount, System, Unavailable

NETNS = "cbench-mfs"
SUBNET = "10.77.0"
NCS = 3
GOAL = 3


class MooseFSSystem(SecondMount, System):
    key = "moosefs"
    label = "moosefs goal 3 (3 chunkservers)"
    packages = ("moosefs-master", "moosefs-chunkserver", "moosefs-client",
                "moosefs-cli")

    def __init__(self, ctx):
        super().__init__(ctx)
        self.ns = NetNS(NETNS, SUBNET)
        self.master = self.ns.addr1
        self.cshost = self.ns.addr2
        self.mnt = os.path.join(self.root, "mnt")
        self.mdir = os.path.join(self.root, "master")
        self.version = None

    def csdir(self, i):
        return os.path.join(self.root, f"cs{i}")

    def _in_ns(self, argv, **kw):
        kw.setdefault("timeout", 60)
        return util.run(self.ns.prefix() + list(argv), **kw)

    def _write(self, path, text):
        with open(path, "w") as f:
            f.write(text)

    def _configure(self):
        os.makedirs(self.mdir)
        shutil.copy("/var/lib/mfs/metadata.mfs.empty",
                    os.path.join(self.mdir, "metadata.mfs"))
        self._write(os.path.join(self.mdir, "mfsexports.cfg"),
                    "*\t/\trw,alldirs,admin,maproot=0:0\n*\t.\trw\n")
        self._write(os.path.join(self.mdir, "mfstopology.cfg"), "")
        self._write(os.path.join(self.mdir, "mfsmaster.cfg"), f"""\
WORKING_USER = root
WORKING_GROUP = root
DATA_PATH = {self.mdir}
EXPORTS_FILENAME = {self.mdir}/mfsexports.cfg
TOPOLOGY_FILENAME = {self.mdir}/mfstopology.cfg
MATOML_LISTEN_HOST = {self.master}
MATOCS_LISTEN_HOST = {self.master}
MATOCL_LISTEN_HOST = {self.master}
""")
        for i in range(1, NCS + 1):
            d = self.csdir(i)
            os.makedirs(os.path.join(d, "chunks"))
            self._write(os.path.join(d, "mfshdd.cfg"),
                        os.path.join(d, "chunks") + "\n")
            self._write(os.path.join(d, "mfschunkserver.cfg"), f"""\
WORKING_USER = root
WORKING_GROUP = root
DATA_PATH = {d}
HDD_CONF_FILENAME = {d}/mfshdd.cfg
MASTER_HOST = {self.master}
MASTER_PORT = 9420
BIND_HOST = {self.cshost}
CSSERV_LISTEN_HOST = {self.cshost}
CSSERV_LISTEN_PORT = {9421 + i}
""")

    def _registered_chunkservers(self):
        rc, out, _ = self._in_ns(["mfscli", "-H", self.master, "-SCS", "-p",
                                  "-s", "|"], check=False, timeout=20)
        if rc != 0:
            return 0
        n = 0
        for line in out.splitlines():
            f = line.split("|")
            # ...|ip|port|id|label|version|load|maintenance|chunks|used|total
            if len(f) > 10 and f[1] == self.cshost and f[10].isdigit() \
                    and int(f[10]) > 0:
                n += 1
        return n

    def _mount(self, mnt=None):
        mnt = mnt or self.mnt
        os.makedirs(mnt, exist_ok=True)
        self._in_ns(["mfsmount", mnt, "-H", self.master, "-P", "9421"],
                    what="mfsmount")
        util.wait_for(lambda: util.is_mounted(mnt), 20,
                      what="mfsmount to appear")

    def _start(self):
        self._configure()
        self._in_ns(["mfsmaster", "-c", f"{self.mdir}/mfsmaster.cfg",
                     "start"], what="mfsmaster start")
        for i in range(1, NCS + 1):
            self._in_ns(["mfschunkserver", "-c",
                         f"{self.csdir(i)}/mfschunkserver.cfg", "start"],
                        what=f"mfschunkserver {i} start")
        try:
            util.wait_for(lambda: self._registered_chunkservers() >= NCS, 60,
                          interval=1, what=f"{NCS} chunkservers to register")
        except util.BenchFailure as e:
            raise Unavailable(str(e))
        self._mount()
        self._in_ns(["mfssetgoal", "-r", str(GOAL), self.mnt],
                    what="mfssetgoal")
        # Deleted files would otherwise sit in the trash for a day.
        self._in_ns(["mfssettrashtime", "-r", "0", self.mnt],
                    what="mfssettrashtime")
        self._check_goal()

    def _check_goal(self):
        """A new file must get GOAL copies right away."""
        probe = os.path.join(self.mnt, ".goalprobe")
        deadline = time.time() + 30
        while True:
            with open(probe, "wb") as f:
                f.write(os.urandom(65536))
                f.flush()
                os.fsync(f.fileno())
            out = self._in_ns(["mfsfileinfo", probe])[1]
            os.unlink(probe)
            copies = out.count("copy ")
            if copies >= GOAL:
                return
            if time.time() > deadline:
                raise Unavailable(f"a new file gets {copies} copies, "
                                  f"not {GOAL}: {out.strip()}")
            time.sleep(1)

    def _stop(self):
        self.end_second_client()
        util.unmount(self.mnt)
        for i in range(1, NCS + 1):
            cfg = f"{self.csdir(i)}/mfschunkserver.cfg"
            if os.path.exists(cfg):
                self._in_ns(["mfschunkserver", "-c", cfg, "stop"],
                            check=False, timeout=60)
        cfg = f"{self.mdir}/mfsmaster.cfg"
        if os.path.exists(cfg):
            self._in_ns(["mfsmaster", "-c", cfg, "stop"], check=False,
                        timeout=60)
        # Anything of ours still alive names our work dir.
        util.kill_pids(util.pids_matching([self.root]))

    # -- System interface ------------------------------------------------
    def setup(self):
        for tool in ("mfsmaster", "mfschunkserver", "mfsmount", "mfscli"):
            if shutil.which(tool) is None:
                raise Unavailable(f"{tool} not installed")
        self._stop()
        util.rmtree(self.root, timeout=self.ctx.prepare_timeout)
        self.ns.create()
        self.version = util.run(["mfsmaster", "-v"], check=False,
                                timeout=10)[1].strip()
        self._start()
        for t in self.targets():
            os.makedirs(t, exist_ok=True)

    def targets(self):
        return [os.path.join(self.mnt, "t0")]

    def prefix(self):
        return self.ns.prefix()


    def make_cold(self):
        util.unmount(self.mnt)
        util.drop_caches()
        self._mount()

    def reset(self):
        # Deletes are cheap in MooseFS (trash time 0): reuse the cluster.
        for t in self.targets():
            util.run(self.prefix() + ["rm", "-rf", t],
                     timeout=self.ctx.prepare_timeout, what="rm -rf target")
            os.makedirs(t)

    def teardown(self):
        try:
            self._stop()
        except Exception as e:  # noqa: BLE001
            util.log(f"{self.key}: teardown: {e}")
        self.ns.delete()
        try:
            util.rmtree(self.root, timeout=self.ctx.prepare_timeout)
        except Exception as e:  # noqa: BLE001
            util.log(f"{self.key}: teardown rm: {e}")

    def describe(self):
        return {"label": self.label, "version": self.version,
                "master": f"{self.master}:9421",
                "chunkservers": [f"{self.cshost}:{9421 + i}"
                                 for i in range(1, NCS + 1)],
                "goal": GOAL, "trashtime": 0}
