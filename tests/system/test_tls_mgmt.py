"""Management TLS (docs/security.md): a cairnd whose state directory holds
secure-access takes TLS connections only, from the CLI (--ssl), from
mounts fetching a layout (mgmt-ssl=on) and from the other cairnds of its
pool, each presenting a certificate from the CA.

cairnd on 127.0.0.201 alone; a pool of two on 127.0.0.202-203; a cairnd
without TLS on 127.0.0.204. Certificates by tests/tls/make-certs.sh."""

import os
import shutil
import subprocess
import tempfile
import time

import pytest

from cairn_cluster import Cluster, exe
from test_tls import certs_in

SOLO = "127.0.0.201"
POOL = ["127.0.0.202", "127.0.0.203"]
PLAIN = "127.0.0.204"


class SecureCluster(Cluster):
    """A cairnd with secure-access whose CLI calls carry --ssl and a
    client certificate."""

    def __init__(self, host, root, certs, cli_cert="client"):
        super().__init__(host=host, root=root, args=[
            "--ssl-key", f"{certs}/server.key", "--ssl-cert", f"{certs}/server.pem",
            "--ssl-ca", f"{certs}/ca.pem"])
        self.certs, self.cli_cert = certs, cli_cert
        os.makedirs(self.workdir, exist_ok=True)
        open(os.path.join(self.workdir, "secure-access"), "w").close()

    def cli(self, *args, check=True, timeout=60):
        return super().cli(*ssl_args(self.certs, self.cli_cert), *args, check=check,
                           timeout=timeout)

    def plain_cli(self, *args):
        return Cluster.cli(self, *args, check=False)


def ssl_args(certs, name):
    return ["--ssl", "--ssl-key", f"{certs}/{name}.key", "--ssl-cert", f"{certs}/{name}.pem",
            "--ssl-ca", f"{certs}/ca.pem"]


@pytest.fixture(scope="module")
def certs():
    root = tempfile.mkdtemp(prefix="tlsm-", dir="/tmp")
    try:
        yield certs_in(os.path.join(root, "certs"))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def node_root(name):
    return tempfile.mkdtemp(prefix=f"tlsm-{name}-", dir="/tmp")


def output(r):
    return r.stdout + r.stderr


def eventually(node, args, want, timeout=5):
    """Whether want shows in node's answer to args within timeout: a change
    made through one server reaches the others as they apply the pool's
    log."""
    end = time.time() + timeout
    while True:
        text = node.cli(*args).stdout
        if want in text or time.time() > end:
            return want in text
        time.sleep(0.2)


def test_cli_and_mount_need_tls(certs):
    root = node_root("solo")
    try:
        with SecureCluster(SOLO, root, certs) as c:
            r = c.plain_cli("volume", "list")
            assert r.returncode != 0 and "requires TLS (secure-access is set)" in output(r), \
                output(r)
            r = Cluster.cli(c, *ssl_args(certs, "stranger"), "volume", "list", check=False)
            assert r.returncode != 0 and "unknown ca" in output(r), output(r)
            assert "TLS handshake with" in c.tail(c.logfile, 20000)
            c.create_volume("sv")
            assert "sv" in c.cli("volume", "list").stdout
            # a mount fetches the layout over TLS, and fails without it
            opts = [f"ssl-key={certs}/client.key", f"ssl-cert={certs}/client.pem",
                    f"ssl-ca={certs}/ca.pem"]
            path = os.path.join(root, "nossl")
            os.makedirs(path)
            r = subprocess.run([exe("cairn-fuse"), f"{c.remote}:/sv", path, "-f", "-o",
                                "mgmt-ssl=off"], capture_output=True, text=True, timeout=30)
            assert r.returncode != 0 and "requires TLS" in output(r), output(r)
            m = c.mount("sv", os.path.join(root, "m"), opts=opts + ["mgmt-ssl=on"])
            with open(os.path.join(m.path, "f"), "wb") as f:
                f.write(b"over a TLS-fetched layout")
            with open(os.path.join(c.volumes["sv"][0], "f"), "rb") as f:
                assert f.read() == b"over a TLS-fetched layout"
            # live options still reach the mount over its TLS watch
            c.cli("volume", "set", "sv", "network.ping-timeout", "7")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_pool_over_tls(certs):
    roots = [node_root(f"p{i}") for i in range(2)] + [node_root("plain")]
    nodes = [SecureCluster(h, r, certs) for h, r in zip(POOL, roots)]
    plain = Cluster(host=PLAIN, root=roots[2])
    try:
        for n in nodes:
            n.start()
        plain.start()
        r = nodes[0].cli("peer", "probe", POOL[1], check=False)
        assert r.returncode == 0 and "peer probe: success" in r.stdout, output(r)
        for n in nodes:
            lines = n.cli("pool", "list").stdout.splitlines()
            assert len(lines) == 3 and all(ln.split()[2] == "Connected" for ln in lines[1:]), lines
        bricks = [os.path.join(roots[i], "b") for i in range(2)]
        for b in bricks:
            os.makedirs(b)
        nodes[0].cli("volume", "create", "pv", "replica", "2",
                     *[f"{h}:{b}" for h, b in zip(POOL, bricks)], "force")
        assert eventually(nodes[1], ("volume", "list"), "pv")
        # a volume command given to the second server reaches the pool
        nodes[1].cli("volume", "set", "pv", "network.ping-timeout", "9")
        assert eventually(nodes[0], ("volume", "info", "pv"), "network.ping-timeout: 9")
        # a server without TLS cannot join
        r = plain.cli("peer", "probe", POOL[0], check=False)
        assert r.returncode != 0 and "Protocol not supported" in output(r), output(r)
        r = nodes[0].cli("peer", "probe", PLAIN, check=False)
        assert r.returncode != 0 and "failed" in output(r), output(r)
        assert len(nodes[0].cli("pool", "list").stdout.splitlines()) == 3
    finally:
        for n in nodes + [plain]:
            n.close()
        for r in roots:
            shutil.rmtree(r, ignore_errors=True)
