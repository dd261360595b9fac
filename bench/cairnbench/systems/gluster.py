"""GlusterFS 10 (Debian's glusterfs-server): a replica 3 volume, replica 3
arbiter 1, or a 2 x 3 distributed-replicate volume, with all bricks on one
address (hence `force`), default options, mounted with the GlusterFS FUSE
client.

glusterd refuses bricks on loopback addresses, so glusterd (and with it the
bricks and the FUSE client) runs in a private network namespace whose veth
pair carries 10.77.1.1 and 10.77.1.2; the traffic never leaves the machine
and never touches a real interface.

With TLS ("glusterfs-tls"): client.ssl and server.ssl on, auth.ssl-allow
'*', and GlusterFS's fixed certificate paths (Debian: /usr/lib/ssl/glusterfs.{key,pem,ca})
filled from cairnbench.tlscerts (files already there are kept aside and put
back at teardown). Management traffic stays plain, as Cairn's does in
cairn-tls (no secure-access file)."""

import os
import shutil
import subprocess
import time

from cairnbench import tlscerts, util
from cairnbench.netns import NetNS
from cairnbench.systems.base import SecondMount, System, Unavailable

NETNS = "cbench-gluster"
SUBNET = "10.77.1"
GLUSTER_SSL = {"key": "/usr/lib/ssl/glusterfs.key", "cert": "/usr/lib/ssl/glusterfs.pem",
               "ca": "/usr/lib/ssl/glusterfs.ca"}


def _glusterd_pids():
    out = subprocess.run(["pgrep", "-x", "glusterd"], capture_output=True,
                         text=True).stdout
    return [int(p) for p in out.split() if util.proc_state(int(p)) != "Z"]


def _in_netns(pid, ns_path):
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(ns_path).st_ino
    except OSError:
        return False


class GlusterSystem(SecondMount, System):
    packages = ("glusterfs-server", "glusterfs-client")

    def __init__(self, ctx, arbiter=False, sets=1, down=False, tls=False, disperse=False):
        self.arbiter = arbiter
        self.disperse = disperse
        self.tls = tls
        self.kept_ssl = {}
        self.sets = sets
        if disperse:
            # seed 003's VM store: 2 x (2 + 1) dispersed, sharded
            self.key, self.volume = "glusterfs-ec", "cbench_ec"
            self.label = f"glusterfs {sets} x (2 + 1) disperse, shard"
        elif sets > 1:
            self.key, self.volume = "glusterfs-dr", "cbench_dr"
            self.label = f"glusterfs {sets} x 3"
        else:
            self.key = "glusterfs-arbiter" if arbiter else "glusterfs"
            self.volume = "cbench_arb" if arbiter else "cbench_r3"
            self.label = ("glusterfs replica 3 arbiter 1" if arbiter
                          else "glusterfs replica 3")
        if down:
            self.down = True
            self.key += "-down"
            self.label += ", 1 of 3 servers down"
        if tls:
            self.key += "-tls"
            self.volume += "_tls"
            self.label += ", TLS"
        super().__init__(ctx)
        self.mnt = os.path.join(self.root, "mnt")
        self.started_glusterd = []
        self.created = False
        self.version = None
        self.ns = NetNS(NETNS, SUBNET)
        self.host = self.ns.addr1

    # -- helpers ---------------------------------------------------------
    def gluster(self, *args, check=True, timeout=120):
        return util.run(self.ns.prefix() + ["gluster", "--mode=script"]
                        + list(args),
                        timeout=timeout, check=check,
                        what="gluster " + " ".join(args[:3]))

    def bricks(self):
        return [os.path.join(self.root, f"brick{i}")
                for i in range(1, 3 * self.sets + 1)]

    def _start_glusterd(self):
        if shutil.which("glusterd") is None:
            raise Unavailable("glusterd not installed")
        running = _glusterd_pids()
        if running and not all(_in_netns(p, self.ns.path) for p in running):
            raise Unavailable("a glusterd outside the benchmark's network "
                              "namespace is running (pids %s); stop it first"
                              % running)
        if not running:
            util.log("starting glusterd")
            util.run(self.ns.prefix() + ["glusterd"], timeout=60,
                     what="glusterd")
            util.wait_for(lambda: bool(_glusterd_pids()), 20,
                          what="glusterd to start")
            self.started_glusterd = _glusterd_pids()
        util.wait_for(
            lambda: self.gluster("pool", "list", check=False)[0] == 0,
            30, interval=0.5, what="glusterd to answer")
        self.version = util.run(["glusterfs", "--version"],
                                timeout=20)[1].splitlines()[0]

    def _create_volume(self):
        for b in self.bricks():
            util.rmtree(b, timeout=self.ctx.prepare_timeout)
            os.makedirs(b)
        spec = ["replica", "3"] + (["arbiter", "1"] if self.arbiter else [])
        if self.disperse:
            spec = ["disperse", "3", "redundancy", "1"]
        self.gluster("volume", "create", self.volume, *spec,
                     *[f"{self.host}:{b}" for b in self.bricks()], "force")
        self.created = True
        if self.disperse:
            self.gluster("volume", "set", self.volume, "features.shard", "on")
        if self.tls:
            for key, value in (("client.ssl", "on"), ("server.ssl", "on"),
                               ("auth.ssl-allow", "*")):
                self.gluster("volume", "set", self.volume, key, value)
        self.gluster("volume", "start", self.volume)

    def _delete_volume(self):
        if not self.created:
            # A volume of this name left behind by an interrupted run.
            rc, out, _ = self.gluster("volume", "list", check=False)
            if rc != 0 or self.volume not in out.split():
                return
        self.gluster("volume", "stop", self.volume, "force", check=False)
        self.gluster("volume", "delete", self.volume, check=False)
        self.created = False

    def _mount(self, mnt=None):
        mnt = mnt or self.mnt
        os.makedirs(mnt, exist_ok=True)
        last = None
        for _ in range(5):
            rc, out, err = util.run(
                self.ns.prefix() +
                ["mount", "-t", "glusterfs", f"{self.host}:/{self.volume}",
                 mnt], timeout=60, check=False)
            if rc == 0 and util.is_mounted(mnt):
                try:
                    os.stat(mnt)
                    return
                except OSError as e:
                    last = str(e)
                    util.unmount(mnt)
            else:
                last = (err or out).strip()
            time.sleep(1)  # bricks may still be coming up
        raise Unavailable(f"mount failed: {last}")

    # -- System interface ------------------------------------------------
    def setup(self):
        os.makedirs(self.root, exist_ok=True)
        util.unmount(self.mnt)
        if not os.path.exists(self.ns.path) or not _glusterd_pids():
            self.ns.create()
        self._start_glusterd()
        if self.tls:
            self._install_certs()
        self._delete_volume()
        try:
            self._create_volume()
        except util.BenchFailure as e:
            raise Unavailable(f"volume create/start failed: {e}")
        self._mount()
        for t in self.targets():
            os.makedirs(t, exist_ok=True)

    def _install_certs(self):
        made = tlscerts.make(os.path.join(self.root, "certs"))
        for what, path in GLUSTER_SSL.items():
            if os.path.exists(path) and path not in self.kept_ssl:
                kept = path + ".cbench-kept"
                os.rename(path, kept)
                self.kept_ssl[path] = kept
            shutil.copyfile(made[what], path)
        os.chmod(GLUSTER_SSL["key"], 0o600)

    def _remove_certs(self):
        if not self.tls:
            return
        for path in GLUSTER_SSL.values():
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            kept = self.kept_ssl.pop(path, None)
            if kept:
                os.rename(kept, path)

    def targets(self):
        return [os.path.join(self.mnt, "t0")]

    def take_server_down(self):
        # Every brick runs on the one glusterd here: "a server" is the third
        # brick of each set (the one Cairn's third server holds).
        gone = set(self.bricks()[2::3])
        pids = []
        for p in util.pids_matching(["--brick-name "]):
            args = util.cmdline(p).split(" ")
            if "--brick-name" in args and args.index("--brick-name") + 1 < len(args) \
                    and args[args.index("--brick-name") + 1] in gone:
                pids.append(p)
        if pids:
            util.log(f"{self.key}: the third brick of each set down (kill -9 of "
                     f"{len(pids)} brick processes)")
        util.kill9(pids)

    def prefix(self):
        return self.ns.prefix()


    def client_pids(self):
        return [p for p in util.pids_matching([f" {self.mnt}"])
                if "--volfile-id" in util.cmdline(p)]

    def reset(self):
        # Removing a big tree through GlusterFS takes minutes; a fresh
        # volume takes seconds and is a cleaner start. It rests as long as
        # every system's new volume does (cli.py, SETTLE_S).
        util.unmount(self.mnt)
        self._delete_volume()
        self._create_volume()
        self._mount()
        for t in self.targets():
            os.makedirs(t)
        time.sleep(self.ctx.settle)

    def make_cold(self):
        util.unmount(self.mnt)
        util.drop_caches()
        self._mount()

    def teardown(self):
        try:
            self.end_second_client()
            util.unmount(self.mnt)
            if _glusterd_pids():
                self._delete_volume()
        except Exception as e:  # noqa: BLE001
            util.log(f"{self.key}: teardown: {e}")
        # Brick and client processes of this run mention our work dir.
        util.kill_pids(util.pids_matching([self.root]))
        if self.started_glusterd:
            # glusterd also spawned the self-heal daemon; it names our
            # glusterd's socket/volfile server, so end it with glusterd.
            shd = util.pids_matching(["glustershd"])
            util.kill_pids(self.started_glusterd + shd)
            self.started_glusterd = []
        if not _glusterd_pids():
            self.ns.delete()
        try:
            self._remove_certs()
        except OSError as e:
            util.log(f"{self.key}: teardown of certificates: {e}")
        try:
            util.rmtree(self.root, timeout=self.ctx.prepare_timeout)
        except Exception as e:  # noqa: BLE001
            util.log(f"{self.key}: teardown rm: {e}")

    def describe(self):
        info = {"label": self.label, "volume": self.volume,
                "shape": ("disperse 3 redundancy 1" if self.disperse else
                          "replica 3 arbiter 1" if self.arbiter else "replica 3"),
                "bricks": [f"{self.host}:{b}" for b in self.bricks()],
                "version": self.version,
                "options": ("client.ssl on, server.ssl on, auth.ssl-allow *"
                            if self.tls else "defaults")}
        return info
