"""Certificates for the TLS systems (cairn-tls, glusterfs-tls): a throwaway
CA and one certificate it signed, made with the `openssl` command line as
docs/security.md shows, both systems using the same kind of key (EC P-256)
so that they pay the same handshake and record costs."""

import os

from cairnbench import util


def make(d, name="cbench"):
    """Makes d/ca.pem and d/NAME.{key,pem} (CN=NAME, signed by the CA);
    returns {"ca": ..., "key": ..., "cert": ...}."""
    os.makedirs(d, exist_ok=True)
    ca_key, ca = os.path.join(d, "ca.key"), os.path.join(d, "ca.pem")
    key, csr, cert = (os.path.join(d, name + ext) for ext in (".key", ".csr", ".pem"))
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    util.run(["openssl", "req", "-x509", *ec, "-days", "7",
              "-subj", "/CN=Cairn benchmark CA", "-keyout", ca_key, "-out", ca],
             timeout=60, what="openssl req (CA)")
    util.run(["openssl", "req", "-new", *ec, "-subj", f"/CN={name}",
              "-keyout", key, "-out", csr], timeout=60, what="openssl req")
    util.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
              "-CAcreateserial", "-days", "7", "-sha256", "-out", cert],
             timeout=60, what="openssl x509 (sign)")
    os.chmod(key, 0o600)
    return {"ca": ca, "key": key, "cert": cert}
