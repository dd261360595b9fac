"""Cairn, built from the repository under test.

Self-contained adapter: build, start cairnd, create/start a volume, mount it
with cairn-fuse, tear down. It asks for the volume type the benchmark wants
(replica 3 over three cairnd on 127.0.0.1, .2 and .3) and falls back to
what the current code supports (a single brick), recording honestly which
one it measured in the label. With two sets ("cairn-dr") it makes a 2 x 3
distributed-replicate volume of six bricks, two on each cairnd, and has no
fallback. With TLS ("cairn-tls") every client-brick connection is TLS 1.3
(server.ssl and client.ssl on, certificates from cairnbench.tlscerts)."""

import os
import socket
import subprocess
import time

from cairnbench import tlscerts, util
from cairnbench.systems.base import SecondMount, System, Unavailable

PORT = 24810
HOSTS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
VOLUME = "cbench"


def _port_open(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class CairnSystem(SecondMount, System):
    key = "cairn"
    label = "cairn"
    packages = ("fuse3",)

    def __init__(self, ctx, sets=1, down=False, quota=False, tls=False, disperse=False):
        self.sets = sets
        self.disperse = disperse
        self.quota = quota
        self.tls = tls
        self.certs = None
        if disperse:
            # seed 003's VM store: 2 x (2 + 1) dispersed, sharded
            self.key = "cairn-ec"
            self.label = f"cairn {sets} x (2 + 1) disperse, shard"
        elif sets > 1:
            self.key = "cairn-dr"
            self.label = f"cairn {sets} x 3"
        if down:
            self.down = True
            self.key += "-down"
        if quota:
            self.key += "-quota"
        if tls:
            self.key += "-tls"
        super().__init__(ctx)
        self.repo = ctx.cairn_repo
        self.build_dir = getattr(ctx, "cairn_build_dir", None) or \
            os.path.join(self.repo, "build")
        self.bin = os.path.join(self.build_dir, "bin")
        self.mnt = os.path.join(self.root, "mnt")
        self.daemons = {}        # host -> Popen
        self.layout = None       # "replica 3", "2 x 3" or "1 brick"
        self.commit = None

    # -- helpers ---------------------------------------------------------
    def _exe(self, name):
        return os.path.join(self.bin, name)

    def cli(self, *args, check=True, timeout=60, input=None):
        return util.run([self._exe("cairn"), "--remote-host",
                         f"{HOSTS[0]}:{PORT}"] + list(args),
                        timeout=timeout, check=check, input=input,
                        what="cairn " + " ".join(args[:3]))

    def _build(self):
        if not os.path.exists(os.path.join(self.repo, "Makefile")):
            raise Unavailable("build failed: no Makefile in " + self.repo)
        log = os.path.join(self.ctx.workdir, "cairn-build.log")
        make = ["make", "-C", self.repo, f"-j{os.cpu_count() or 2}",
                f"BUILD={self.build_dir}"]
        util.log(f"cairn: building ({' '.join(make)})")
        rc, out, err = util.run(make, timeout=1200, check=False)
        if rc != 0:
            # Tests or fuzzers may not build while the daemons do: build
            # each binary the benchmark needs on its own before giving up.
            util.log("cairn: full build failed; building the binaries only")
            # cairn-brickd is optional: only if cairnd runs bricks in it.
            rc = 0
            for b in ("cairnd", "cairn-brickd", "cairn", "cairn-fuse"):
                rcb, o2, e2 = util.run(make + [os.path.join(self.bin, b)],
                                       timeout=1200, check=False)
                out, err = out + o2, err + e2
                if rcb != 0 and b != "cairn-brickd":
                    rc = rcb
        with open(log, "w") as f:
            f.write(out + err)
        if rc != 0:
            last = (err.strip() or out.strip()).splitlines()[-1:] or [""]
            raise Unavailable(f"build failed (see {log}): {last[0][:200]}")
        for exe in ("cairnd", "cairn", "cairn-fuse"):
            if not os.access(self._exe(exe), os.X_OK):
                raise Unavailable(f"build failed: {self._exe(exe)} missing")
        self.commit = util.run(["git", "-C", self.repo, "rev-parse",
                                "--short", "HEAD"], check=False,
                               timeout=10)[1].strip() or None

    def _start_daemon(self, host):
        wd = os.path.join(self.root, "cairnd-" + host)
        os.makedirs(wd, exist_ok=True)
        logf = open(os.path.join(self.root, f"cairnd-{host}.log"), "ab")
        ssl = []
        if self.certs:
            ssl = ["--ssl-key", self.certs["key"], "--ssl-cert", self.certs["cert"],
                   "--ssl-ca", self.certs["ca"]]
        p = subprocess.Popen(
            [self._exe("cairnd"), "--foreground", "--listen",
             f"{host}:{PORT}", "--workdir", wd] + ssl,
            stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
            start_new_session=True)
        self.daemons[host] = p
        deadline = time.time() + 15
        while time.time() < deadline:
            if p.poll() is not None:
                return False
            if _port_open(host, PORT):
                return True
            time.sleep(0.1)
        return False

    def _stop_daemon(self, host):
        p = self.daemons.pop(host, None)
        if p:
            util.kill_pids([p.pid])
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def _brick(self, i):
        return os.path.join(self.root, f"brick{i}")

    def _create_volume(self):
        n = 3 * self.sets
        for i in range(1, n + 1):
            util.rmtree(self._brick(i), timeout=self.ctx.prepare_timeout)
        self.layout = None
        if all(h in self.daemons for h in HOSTS):
            for h in HOSTS[1:]:
                self.cli("peer", "probe", h, check=False)
            for i in range(1, n + 1):
                os.makedirs(self._brick(i))
            # each set's three bricks on the three hosts
            shape = ["disperse", "3", "redundancy", "1"] if self.disperse else ["replica", "3"]
            rc, out, err = self.cli("volume", "create", VOLUME, *shape,
                                    *[f"{HOSTS[i % 3]}:{self._brick(i + 1)}"
                                      for i in range(n)], "force", check=False)
            if rc == 0 and self.disperse:
                self.layout = f"{self.sets} x (2 + 1)"
                self.cli("volume", "set", VOLUME, "features.shard", "on")
            elif rc == 0:
                self.layout = "replica 3" if self.sets == 1 else f"{self.sets} x 3"
            elif self.sets > 1 or self.disperse:
                raise Unavailable(f"volume create failed: {(err or out).strip()[:200]}")
        elif self.sets > 1:
            raise Unavailable("a distributed-replicate volume needs cairnd on "
                              + ", ".join(HOSTS))
        if self.layout is None:
            for h in HOSTS[1:]:
                self._stop_daemon(h)
            os.makedirs(self._brick(1), exist_ok=True)
            self.cli("volume", "create", VOLUME,
                     f"{HOSTS[0]}:{self._brick(1)}", "force")
            self.layout = "1 brick"
        if self.tls:
            for key in ("server.ssl", "client.ssl"):
                self.cli("volume", "set", VOLUME, key, "on")
        self.cli("volume", "start", VOLUME)
        self.label = ("cairn replica 3" if self.layout == "replica 3" else
                      f"cairn {self.layout} disperse, shard" if self.disperse else
                      f"cairn {self.layout}" if self.sets > 1 else
                      "cairn (1 brick; replica not yet available)")
        if self.down:
            self.label += ", 1 of 3 servers down"
        if self.quota:
            self.label += ", quota on the target"
        if self.tls:
            self.label += ", TLS"

    def _delete_volume(self):
        self.cli("volume", "stop", VOLUME, check=False, input="y\n")
        self.cli("volume", "delete", VOLUME, check=False, input="y\n")

    def _mount(self, mnt=None):
        mnt = mnt or self.mnt
        os.makedirs(mnt, exist_ok=True)
        ssl = []
        if self.certs:
            ssl = ["-o", f"ssl-key={self.certs['key']},ssl-cert={self.certs['cert']},"
                   f"ssl-ca={self.certs['ca']}"]
        util.run([self._exe("cairn-fuse"), f"{HOSTS[0]}:{PORT}:/{VOLUME}",
                  mnt] + ssl, timeout=60, what="cairn-fuse")
        util.wait_for(lambda: util.is_mounted(mnt), 20,
                      what="cairn-fuse mount to appear")

    # -- System interface ------------------------------------------------
    def setup(self):
        self._build()
        util.unmount(self.mnt)
        util.kill_pids(util.pids_matching([self.root]))
        util.rmtree(self.root, timeout=self.ctx.prepare_timeout)
        os.makedirs(self.root)
        if self.tls:
            self.certs = tlscerts.make(os.path.join(self.root, "certs"))
        if not self._start_daemon(HOSTS[0]):
            raise Unavailable("cairnd did not start (see "
                              f"{self.root}/cairnd-{HOSTS[0]}.log)")
        for h in HOSTS[1:]:
            self._start_daemon(h)
        try:
            self._create_volume()
            self._mount()
        except util.BenchFailure as e:
            raise Unavailable(str(e))
        for t in self.targets():
            os.makedirs(t, exist_ok=True)
        self._limit_targets()

    def _limit_targets(self):
        """cairn-quota: a usage and an object limit on every target
        directory, far above what any workload writes, so that every
        request is counted and checked (docs/quota.md) and none refused."""
        if not self.quota:
            return
        self.cli("volume", "quota", VOLUME, "enable")
        for t in self.targets():
            path = "/" + os.path.relpath(t, self.mnt)
            self.cli("volume", "quota", VOLUME, "limit-usage", path, "1TB")
            self.cli("volume", "quota", VOLUME, "limit-objects", path, "100000000")

    def targets(self):
        return [os.path.join(self.mnt, "t0")]

    def take_server_down(self):
        if self.layout == "1 brick":
            raise Unavailable("a one-brick volume has no server to lose")
        host = HOSTS[2]
        d = self.daemons.pop(host, None)
        pids = [d.pid] if d else []
        # its bricks and self-heal daemon: they name the host, under our root
        pids += [p for p in util.pids_matching([f"--listen {host}:", f"--mgmt {host}:"])
                 if self.root in util.cmdline(p)]
        if pids:
            util.log(f"cairn: server {host} down (kill -9 of {len(pids)} processes)")
        util.kill9(pids)
        if d:
            d.wait(timeout=5)

    def libcairn_copy(self, src, target, name):
        """The shell command that copies src to target/name (a directory of
        the mount) through libcairn instead of the mount."""
        rel = os.path.relpath(target, self.mnt)
        return (f"{self._exe('cairn-copy')} {src} {HOSTS[0]}:{PORT}:/{VOLUME} "
                f"/{rel}/{name}")


    def nbd_start(self, target, name, size_mib):
        """Serves target/name (a file of the volume, made sparse at
        size_mib when missing) with nbdkit and the Cairn plugin on a unix
        socket, no FUSE in the data path; returns (uri, stop)."""
        plugin = os.path.join(self.build_dir, "lib", "nbdkit-cairn-plugin.so")
        if not os.path.exists(plugin):
            raise util.BenchFailure(f"{plugin} missing (nbdkit-plugin-dev at build time)")
        d = os.path.join(self.root, "nbd")
        os.makedirs(d, exist_ok=True)
        sock, pidfile = os.path.join(d, "nbd.sock"), os.path.join(d, "nbdkit.pid")
        for p in (sock, pidfile):
            if os.path.exists(p):
                os.unlink(p)
        rel = "/" + os.path.relpath(os.path.join(target, name), self.mnt)
        util.run(["nbdkit", "--pidfile", pidfile, "-U", sock, plugin,
                  f"volume={HOSTS[0]}:{PORT}:/{VOLUME}", f"file={rel}", f"size={size_mib}M",
                  f"log-file={os.path.join(d, 'plugin.log')}"] + self._nbd_ssl(),
                 timeout=60, what="nbdkit")
        util.wait_for(lambda: os.path.exists(sock) and os.path.exists(pidfile), 20,
                      what="nbdkit to listen")

        def stop():
            try:
                with open(pidfile) as f:
                    util.kill_pids([int(f.read().strip())])
            except (OSError, ValueError):
                pass
        return f"nbd+unix:///?socket={sock}", stop

    def _nbd_ssl(self):
        if self.certs:
            raise util.BenchFailure("the NBD plugin takes no TLS parameters")
        return []

    def client_pids(self):
        return util.pids_matching([f"cairn-fuse {HOSTS[0]}:{PORT}:/{VOLUME} "
                                   f"{self.mnt}"])

    def reset(self):
        try:
            super().reset()
        except (util.BenchFailure, util.BenchTimeout, OSError) as e:
            util.log(f"cairn: rm -rf through the mount failed ({e}); "
                     "recreating the volume")
            util.unmount(self.mnt)
            self._delete_volume()
            self._create_volume()
            self._mount()
            for t in self.targets():
                os.makedirs(t, exist_ok=True)
            self._limit_targets()

    def make_cold(self):
        util.unmount(self.mnt)
        util.drop_caches()
        self._mount()

    def teardown(self):
        try:
            self.end_second_client()
            util.unmount(self.mnt)
            if self.daemons:
                self._delete_volume()
        except Exception as e:  # noqa: BLE001
            util.log(f"cairn: teardown: {e}")
        for h in list(self.daemons):
            self._stop_daemon(h)
        util.kill_pids(util.pids_matching([self.root]))
        try:
            util.rmtree(self.root, timeout=self.ctx.prepare_timeout)
        except Exception as e:  # noqa: BLE001
            util.log(f"cairn: teardown rm: {e}")

    def describe(self):
        return {"label": self.label, "layout": self.layout,
                "commit": self.commit, "daemons": sorted(self.daemons)}
