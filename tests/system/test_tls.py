"""TLS between clients and bricks (docs/security.md): client.ssl and
server.ssl, auth.ssl-allow, and each bad client refused at once with its
reason while the bricks keep serving the good one.

One cairnd on 127.0.0.200 with its certificate, key and CA given by
--ssl-*; certificates made by tests/tls/make-certs.sh with `openssl`
(a CA; client, other, server, expired and revoked certificates from it;
a stranger's from another CA; a CRL listing the revoked one). Volumes:
  tv  server.ssl + client.ssl, ssl.crl-path, auth.ssl-allow client,other
  pv  server.ssl only: a client without TLS meets a TLS brick
  cv  client.ssl only: a TLS client meets a brick without TLS"""

import glob
import hashlib
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request

import pytest

from cairn_cluster import Cluster, exe

HOST = "127.0.0.200"
METRICS_PORT = 24809
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def certs_in(d):
    subprocess.run([os.path.join(SRC, "tests", "tls", "make-certs.sh"), d], check=True)
    return d


@pytest.fixture(scope="module")
def tls():
    root = tempfile.mkdtemp(prefix="tls-", dir="/tmp")
    certs = certs_in(os.path.join(root, "certs"))
    args = ["--ssl-key", f"{certs}/server.key", "--ssl-cert", f"{certs}/server.pem",
            "--ssl-ca", f"{certs}/ca.pem", "--metrics", f"{HOST}:{METRICS_PORT}"]
    try:
        with Cluster(host=HOST, root=root, args=args) as c:
            yield from make_volumes(c, certs)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def make_volumes(c, certs):
    if True:
        c.certs = certs
        c.create_volume("tv", options={"server.ssl": "on", "client.ssl": "on",
                                       "ssl.crl-path": f"{certs}/crl.pem",
                                       "auth.ssl-allow": "client,other",
                                       "network.ping-timeout": "3"})
        c.create_volume("pv", options={"server.ssl": "on"})
        c.create_volume("cv", options={"client.ssl": "on"})
        c.good = c.mount("tv", os.path.join(c.root, "good"), opts=client_opts(certs, "client"))
        yield c


def client_opts(certs, name, ca="ca.pem"):
    return [f"ssl-key={certs}/{name}.key", f"ssl-cert={certs}/{name}.pem",
            f"ssl-ca={certs}/{ca}"]


def try_mount(c, vol, opts, name):
    """Runs cairn-fuse in the foreground expecting it to fail at once:
    (rc, output)."""
    path = os.path.join(c.root, name)
    os.makedirs(path, exist_ok=True)
    args = [exe("cairn-fuse"), f"{c.remote}:/{vol}", path, "-f"]
    for o in opts:
        args += ["-o", o]
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        subprocess.run(["umount", "-l", path], capture_output=True)
        raise AssertionError(f"cairn-fuse {vol} with {opts} did not fail at once")
    return r.returncode, r.stdout + r.stderr


def brick_log(c, vol):
    logs = glob.glob(os.path.join(c.workdir, "logs", "bricks", "*.log"))
    brick = c.volumes[vol][0].strip("/").replace("/", "-")
    text = ""
    for p in logs:
        if brick in os.path.basename(p):
            with open(p, errors="replace") as f:
                text += f.read()
    assert text, (brick, logs)
    return text


def good_still_serves(c, tag):
    data = os.urandom(100_000) + tag.encode()
    p = os.path.join(c.good.path, f"after-{tag}")
    with open(p, "wb") as f:
        f.write(data)
    with open(p, "rb") as f:
        assert f.read() == data
    with open(os.path.join(c.volumes["tv"][0], f"after-{tag}"), "rb") as f:
        assert f.read() == data


def test_good_client_writes_and_reads(tls):
    c = tls
    blobs = {f"f{i}": os.urandom(n) for i, n in enumerate((0, 1, 65536, 3 << 20))}
    for name, b in blobs.items():
        with open(os.path.join(c.good.path, name), "wb") as f:
            f.write(b)
    for name, b in blobs.items():
        with open(os.path.join(c.good.path, name), "rb") as f:
            assert hashlib.sha256(f.read()).digest() == hashlib.sha256(b).digest()
        with open(os.path.join(c.volumes["tv"][0], name), "rb") as f:
            assert f.read() == b
    # a second, fresh mount reads what the first wrote
    m = c.mount("tv", os.path.join(c.root, "fresh"), opts=client_opts(c.certs, "other"))
    with open(os.path.join(m.path, "f3"), "rb") as f:
        assert f.read() == blobs["f3"]
    m.stop()
    c.mounts.remove(m)


@pytest.mark.parametrize("name,ca,vol,want,brick_says", [
    ("stranger", "ca.pem", "tv", "unknown ca", "TLS handshake with"),
    ("expired", "ca.pem", "tv", "certificate expired", "certificate has expired"),
    ("revoked", "ca.pem", "tv", "certificate revoked", "certificate revoked"),
    ("client", "other-ca.pem", "tv", "certificate was refused", None),
    ("server", "ca.pem", "tv", "certificate name server is not allowed", "auth.ssl-allow"),
    ("client", "ca.pem", "pv", "requires TLS (server.ssl is on)", "connected without TLS"),
    ("client", "ca.pem", "cv", "closed the connection during the TLS handshake",
     "it speaks TLS, which is off"),
])
def test_bad_client_refused_with_reason(tls, name, ca, vol, want, brick_says):
    c = tls
    rc, out = try_mount(c, vol, client_opts(c.certs, name, ca), f"bad-{name}-{vol}")
    assert rc != 0, out
    assert want in out, out
    if brick_says:  # the brick logs once it has sent its alert: maybe after the client saw it
        end = time.time() + 5
        while brick_says not in brick_log(c, vol):
            assert time.time() < end, brick_log(c, vol)[-3000:]
            time.sleep(0.1)
    good_still_serves(c, f"{name}-{vol}")


def brick_port(c, vol):
    return c.brick_status(vol)[0][2]


def test_truncated_handshake_and_garbage(tls):
    c = tls
    port = brick_port(c, "tv")
    # half a ClientHello, then gone
    s = socket.create_connection((HOST, port), timeout=5)
    s.sendall(bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00]))
    s.close()
    # a complete handshake, then bytes that are not Cairn frames
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(f"{c.certs}/ca.pem")
    ctx.load_cert_chain(f"{c.certs}/client.pem", f"{c.certs}/client.key")
    raw = socket.create_connection((HOST, port), timeout=5)
    t = ctx.wrap_socket(raw)
    t.sendall(b"GET / HTTP/1.0\r\n\r\n" + os.urandom(64))
    try:
        assert t.recv(100) == b""  # the brick hangs up without answering
    except (ssl.SSLError, ConnectionResetError):
        pass
    t.close()
    # records that do not decrypt, under a session
    raw = socket.create_connection((HOST, port), timeout=5)
    t = ctx.wrap_socket(raw)
    raw2 = socket.socket(fileno=os.dup(t.fileno()))
    raw2.sendall(bytes([0x17, 0x03, 0x03, 0x00, 0x20]) + os.urandom(32))
    raw2.close()
    try:
        t.recv(100)
    except (ssl.SSLError, ConnectionResetError, OSError):
        pass
    t.close()
    time.sleep(0.3)
    log = brick_log(c, "tv")
    assert "bad magic" in log or "closing connection" in log, log[-2000:]
    good_still_serves(c, "garbage")


def test_ssl_allow_change_closes_connections(tls):
    c = tls
    m = c.mount("tv", os.path.join(c.root, "other"), opts=client_opts(c.certs, "other"))
    with open(os.path.join(m.path, "by-other"), "wb") as f:
        f.write(b"before")
    c.cli("volume", "set", "tv", "auth.ssl-allow", "client")
    end = time.time() + 10
    while "certificate name other is no longer in auth.ssl-allow" not in brick_log(c, "tv"):
        assert time.time() < end, "the brick did not close the connection of 'other'"
        time.sleep(0.1)
    # the mount of 'other' is refused from now on; 'client' keeps working
    with pytest.raises(OSError):
        with open(os.path.join(m.path, "by-other-2"), "wb") as f:
            f.write(b"after")
    good_still_serves(c, "allow-change")
    assert "certificate name other is not allowed" in m.tail()
    # allowed again: the mount reconnects by itself
    c.cli("volume", "set", "tv", "auth.ssl-allow", "client,other")
    end = time.time() + 20
    while True:
        try:
            with open(os.path.join(m.path, "by-other-3"), "wb") as f:
                f.write(b"again")
            break
        except OSError:
            assert time.time() < end, m.tail()
            time.sleep(0.5)
    with open(os.path.join(c.volumes["tv"][0], "by-other-3"), "rb") as f:
        assert f.read() == b"again"
    m.stop()
    c.mounts.remove(m)


def test_cli_reaches_tls_bricks(tls):
    """The CLI's own brick connections (status clients, heal, profile, top)
    use TLS with its files when client.ssl is on."""
    c = tls
    files = ["--ssl-key", f"{c.certs}/client.key", "--ssl-cert", f"{c.certs}/client.pem",
             "--ssl-ca", f"{c.certs}/ca.pem"]
    out = c.cli(*files, "volume", "status", "tv", "clients").stdout
    assert "Clients connected : " in out and "Clients connected : 0" not in out, out


def test_metrics_scrape_tls_bricks(tls):
    """cairnd's metrics ask its TLS bricks over TLS: they show as up."""
    url = f"http://{HOST}:{METRICS_PORT}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    up = [ln for ln in text.splitlines() if ln.startswith("cairn_brick_up{") and 'volume="tv"' in ln]
    assert up and all(ln.endswith(" 1") for ln in up), up


def test_quota_sums_over_tls_bricks(tls):
    """cairnd sums a distributed volume's quota usage over its TLS bricks:
    each brick learns what the other set holds (docs/quota.md), and the
    CLI's quota list (its own brick connections) adds both."""
    c = tls
    certs = c.certs
    bricks = [os.path.join(c.root, f"qv-b{i}") for i in range(2)]
    c.create_volume("qv", bricks, options={"server.ssl": "on", "client.ssl": "on",
                                           "client.write-back": "off"})
    m = c.mount("qv", os.path.join(c.root, "qv-m"), opts=client_opts(certs, "client"))
    os.mkdir(os.path.join(m.path, "dd"))
    files = ["--ssl-key", f"{certs}/client.key", "--ssl-cert", f"{certs}/client.pem",
             "--ssl-ca", f"{certs}/ca.pem"]
    for args in (("enable",), ("soft-timeout", "1"), ("limit-usage", "/dd", "1GB")):
        c.cli(*files, "volume", "quota", "qv", *args)
    for i in range(40):
        with open(os.path.join(m.path, "dd", f"f{i}"), "wb") as f:
            f.write(b"q" * (1000 + i))
    on = [sum(os.path.getsize(os.path.join(b, "dd", f)) for f in os.listdir(os.path.join(b, "dd"))
              if os.stat(os.path.join(b, "dd", f)).st_mode & 0o7777 != 0o1000) for b in bricks]
    assert all(on), on  # both sets hold some

    def others():
        res = []
        for b in bricks:
            try:
                with open(os.path.join(b, ".cairn", "quota-others")) as f:
                    res.append(int(f.read().split()[0]))
            except (OSError, ValueError, IndexError):
                res.append(None)
        return res
    end = time.time() + 20
    while others() != [on[1], on[0]]:
        assert time.time() < end, f"the sums over TLS never arrived: {others()}, want {on[::-1]}"
        time.sleep(0.3)
    out = c.cli(*files, "--xml", "volume", "quota", "qv", "list", "/dd").stdout
    assert f"<used_space>{sum(on)}</used_space>" in out, out
