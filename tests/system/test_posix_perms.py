"""Permissions, ownership, setgid directories and POSIX ACLs, checked by the
kernel for callers running as unprivileged users (uid 1000, gid 1000,
supplementary groups [1000, 2000]; uid 1001 for ACL tests)."""

import os
import stat
import subprocess

from cairn_cluster import as_user


def put(path, data=b"secret", mode=0o644, uid=0, gid=0):
    with open(path, "wb") as f:
        f.write(data)
    os.chown(path, uid, gid)
    os.chmod(path, mode)


READ = 'open(os.environ["P"], "rb").read()'
WRITE = 'open(os.environ["P"], "ab").write(b"w")'


def test_supplementary_group_grants_read(tdir):
    p = os.path.join(tdir.a, "grp")
    put(p, b"for group 2000", mode=0o060, uid=0, gid=2000)
    assert as_user("print(open(os.environ['P'], 'rb').read().decode())", P=p) == \
        ("OK", "for group 2000\nOK\n")


def test_supplementary_group_on_other_mount(tdir):
    put(os.path.join(tdir.a, "grp"), mode=0o060, uid=0, gid=2000)
    last, _ = as_user(READ, P=os.path.join(tdir.b, "grp"))
    assert last == "OK"


def test_group_not_held_denied(tdir):
    p = os.path.join(tdir.a, "grp")
    put(p, mode=0o060, uid=0, gid=2000)
    last, _ = as_user(READ, P=p, groups=(1000,))
    assert last == "ERR EACCES"


def test_root_only_file_denied(tdir):
    p = os.path.join(tdir.a, "rootonly")
    put(p, mode=0o600)
    assert as_user(READ, P=p)[0] == "ERR EACCES"
    assert as_user(WRITE, P=p)[0] == "ERR EACCES"


def test_owner_class_overrides_group_class(tdir):
    # owner 1000 with no owner bits is denied even though the group bits allow
    p = os.path.join(tdir.a, "f")
    put(p, mode=0o060, uid=1000, gid=1000)
    assert as_user(READ, P=p)[0] == "ERR EACCES"


def test_other_bits(tdir):
    p = os.path.join(tdir.a, "f")
    put(p, mode=0o604, uid=0, gid=0)
    assert as_user(READ, P=p)[0] == "OK"
    assert as_user(WRITE, P=p)[0] == "ERR EACCES"


def test_directory_search_permission(tdir):
    d = os.path.join(tdir.a, "noexec")
    os.mkdir(d)
    put(os.path.join(d, "f"), mode=0o644)
    os.chmod(d, 0o744)
    assert as_user(READ, P=os.path.join(d, "f"))[0] == "ERR EACCES"
    os.chmod(d, 0o755)
    assert as_user(READ, P=os.path.join(d, "f"))[0] == "OK"


def test_directory_write_permission_for_create(tdir):
    d = os.path.join(tdir.a, "ro")
    os.mkdir(d)
    os.chmod(d, 0o755)
    assert as_user(WRITE, P=os.path.join(d, "new"))[0] == "ERR EACCES"
    os.chmod(d, 0o777)
    assert as_user(WRITE, P=os.path.join(d, "new"))[0] == "OK"


def test_created_file_owned_by_caller(tdir):
    p = os.path.join(tdir.a, "mine")
    assert as_user(WRITE, P=p)[0] == "OK"
    for q in (p, os.path.join(tdir.b, "mine"), os.path.join(tdir.brick, "mine")):
        st = os.stat(q)
        assert (st.st_uid, st.st_gid) == (1000, 1000), q


def test_mkdir_owned_by_caller(tdir):
    p = os.path.join(tdir.a, "d")
    assert as_user('os.mkdir(os.environ["P"])', P=p)[0] == "OK"
    st = os.stat(os.path.join(tdir.b, "d"))
    assert (st.st_uid, st.st_gid) == (1000, 1000)


def test_sticky_directory_blocks_others_unlink(tdir):
    d = os.path.join(tdir.a, "tmp")
    os.mkdir(d)
    os.chmod(d, 0o1777)
    put(os.path.join(d, "rootfile"), mode=0o666)
    assert as_user('os.unlink(os.environ["P"])', P=os.path.join(d, "rootfile"))[0] == \
        "ERR EPERM"
    assert os.path.exists(os.path.join(d, "rootfile"))


def test_chmod_by_non_owner_eperm(tdir):
    p = os.path.join(tdir.a, "f")
    put(p, mode=0o666)
    assert as_user('os.chmod(os.environ["P"], 0o777)', P=p)[0] == "ERR EPERM"
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o666


def test_chmod_by_owner(tdir):
    p = os.path.join(tdir.a, "f")
    put(p, mode=0o644, uid=1000, gid=1000)
    assert as_user('os.chmod(os.environ["P"], 0o600)', P=p)[0] == "OK"
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.join(tdir.b, "f")).st_mode) == 0o600


def test_chown_by_non_root_eperm(tdir):
    p = os.path.join(tdir.a, "f")
    put(p, uid=1000, gid=1000)
    assert as_user('os.chown(os.environ["P"], 1001, -1)', P=p)[0] == "ERR EPERM"
    assert os.stat(p).st_uid == 1000


def test_chgrp_by_owner_to_own_group(tdir):
    p = os.path.join(tdir.a, "f")
    put(p, uid=1000, gid=1000)
    assert as_user('os.chown(os.environ["P"], -1, 2000)', P=p)[0] == "OK"
    assert os.stat(os.path.join(tdir.b, "f")).st_gid == 2000
    assert as_user('os.chown(os.environ["P"], -1, 3000)', P=p)[0] == "ERR EPERM"
    assert os.stat(p).st_gid == 2000


def test_chown_by_root(tdir):
    p = os.path.join(tdir.a, "f")
    put(p)
    os.chown(p, 1234, 5678)
    for q in (p, os.path.join(tdir.b, "f"), os.path.join(tdir.brick, "f")):
        st = os.stat(q)
        assert (st.st_uid, st.st_gid) == (1234, 5678), q


def test_chown_clears_setuid(tdir):
    p = os.path.join(tdir.a, "f")
    put(p, mode=0o4755, uid=1000, gid=1000)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o4755
    os.chown(p, 1001, 1000)
    assert not os.stat(p).st_mode & stat.S_ISUID


def test_setgid_directory_inheritance(tdir):
    d = os.path.join(tdir.a, "sgid")
    os.mkdir(d)
    os.chown(d, 0, 2000)
    os.chmod(d, 0o2777)
    # a file created by root and one created by uid 1000 both get group 2000
    with open(os.path.join(d, "byroot"), "wb") as f:
        f.write(b"x")
    assert as_user(WRITE, P=os.path.join(d, "byuser"))[0] == "OK"
    os.mkdir(os.path.join(d, "subdir"))
    assert os.stat(os.path.join(d, "byroot")).st_gid == 2000
    st = os.stat(os.path.join(tdir.b, "sgid", "byuser"))
    assert (st.st_uid, st.st_gid) == (1000, 2000)
    sub = os.stat(os.path.join(d, "subdir"))
    assert sub.st_gid == 2000
    assert sub.st_mode & stat.S_ISGID


def test_umask_applied_on_create(tdir):
    p = os.path.join(tdir.a, "f")
    code = 'os.umask(0o027)\nos.close(os.open(os.environ["P"], os.O_CREAT | os.O_WRONLY, 0o666))'
    assert as_user(code, P=p)[0] == "OK"
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o640


# ---- POSIX ACLs ----

def acl(*args):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"{args}: {r.stderr}"
    return r.stdout


def test_acl_named_user_grants_access(tdir):
    p = os.path.join(tdir.a, "f")
    put(p, b"acl data", mode=0o600)
    acl("setfacl", "-m", "u:1001:r", p)
    out = acl("getfacl", "-n", p)
    assert "user:1001:r--" in out
    assert as_user(READ, P=p, uid=1001, gid=1001, groups=(1001,))[0] == "OK"
    assert as_user(READ, P=p, uid=1000, gid=1000, groups=(1000,))[0] == "ERR EACCES"
    # the other mount enforces it too
    q = os.path.join(tdir.b, "f")
    assert "user:1001:r--" in acl("getfacl", "-n", q)
    assert as_user(READ, P=q, uid=1001, gid=1001, groups=(1001,))[0] == "OK"


def test_acl_mask_limits_named_entries(tdir):
    p = os.path.join(tdir.a, "f")
    put(p, mode=0o600)
    acl("setfacl", "-m", "u:1001:rw,m::r", p)
    assert as_user(READ, P=p, uid=1001, gid=1001, groups=(1001,))[0] == "OK"
    assert as_user(WRITE, P=p, uid=1001, gid=1001, groups=(1001,))[0] == "ERR EACCES"


def test_acl_named_group(tdir):
    p = os.path.join(tdir.a, "f")
    put(p, mode=0o600)
    acl("setfacl", "-m", "g:2000:r", p)
    assert as_user(READ, P=p)[0] == "OK"
    assert as_user(READ, P=p, groups=(1000,))[0] == "ERR EACCES"


def test_acl_default_inherited(tdir):
    d = os.path.join(tdir.a, "d")
    os.mkdir(d)
    os.chmod(d, 0o755)
    acl("setfacl", "-d", "-m", "u:1001:rw", d)
    assert "default:user:1001:rw-" in acl("getfacl", "-n", d)
    f = os.path.join(d, "new")
    put(f, b"inherited")
    os.chmod(f, 0o660)  # keep the mask at rw
    out = acl("getfacl", "-n", f)
    assert "user:1001:rw-" in out
    assert as_user(READ, P=f, uid=1001, gid=1001, groups=(1001,))[0] == "OK"
    assert as_user(READ, P=f, uid=1002, gid=1002, groups=(1002,))[0] == "ERR EACCES"
    sub = os.path.join(d, "sub")
    os.mkdir(sub)
    assert "default:user:1001:rw-" in acl("getfacl", "-n", sub)


def test_acl_removed_revokes(tdir):
    p = os.path.join(tdir.a, "f")
    put(p, mode=0o600)
    acl("setfacl", "-m", "u:1001:r", p)
    assert as_user(READ, P=p, uid=1001, gid=1001, groups=(1001,))[0] == "OK"
    acl("setfacl", "-b", p)
    assert as_user(READ, P=p, uid=1001, gid=1001, groups=(1001,))[0] == "ERR EACCES"


def modes(tdir, name):
    """The file's permission bits seen through both mounts and on the brick."""
    return {stat.S_IMODE(os.stat(os.path.join(d, name)).st_mode)
            for d in (tdir.a, tdir.b, tdir.brick)}


PWRITE = ('fd = os.open(os.environ["P"], os.O_WRONLY)\n'
          'for i in range(3):\n'
          '    os.pwrite(fd, b"w" * 4096, i * 4096)\n'
          'os.close(fd)')


def test_write_by_other_user_clears_setuid_and_setgid(tdir):
    p = os.path.join(tdir.a, "sid")
    put(p, mode=0o6777, uid=0, gid=0)
    os.stat(os.path.join(tdir.b, "sid"))
    assert as_user(PWRITE, P=p)[0] == "OK"
    assert modes(tdir, "sid") == {0o0777}
    # and the written data is there
    with open(os.path.join(tdir.b, "sid"), "rb") as f:
        assert f.read() == b"w" * 12288


def test_setgid_without_group_exec_survives_a_write(tdir):
    # not an executable set-group-id file (mandatory locking mark): kept
    p = os.path.join(tdir.a, "sgid")
    put(p, mode=0o2666, uid=0, gid=0)
    assert as_user(PWRITE, P=p)[0] == "OK"
    assert modes(tdir, "sgid") == {0o2666}


def test_write_by_root_keeps_setuid(tdir):
    p = os.path.join(tdir.a, "rootw")
    put(p, mode=0o4755, uid=1000, gid=1000)
    fd = os.open(p, os.O_WRONLY)
    os.pwrite(fd, b"root", 0)
    os.close(fd)
    assert modes(tdir, "rootw") == {0o4755}


def test_truncate_by_other_user_clears_setuid(tdir):
    p = os.path.join(tdir.a, "tr")
    put(p, data=b"x" * 100, mode=0o4777, uid=0, gid=0)
    assert as_user('os.truncate(os.environ["P"], 10)', P=p)[0] == "OK"
    assert modes(tdir, "tr") == {0o0777}
    assert os.stat(os.path.join(tdir.b, "tr")).st_size == 10


def test_open_truncate_by_other_user_clears_setuid(tdir):
    p = os.path.join(tdir.a, "otr")
    put(p, data=b"x" * 100, mode=0o4777, uid=0, gid=0)
    assert as_user('os.close(os.open(os.environ["P"], os.O_WRONLY | os.O_TRUNC))', P=p)[0] == "OK"
    assert modes(tdir, "otr") == {0o0777}
    assert os.stat(os.path.join(tdir.b, "otr")).st_size == 0


def test_write_removes_file_capabilities(tdir):
    p = os.path.join(tdir.a, "cap")
    put(p, mode=0o755)
    # a version 2 capability set: cap_net_raw permitted and effective
    cap = bytes.fromhex("01000002" "00200000" "00000000" "00000000" "00000000")
    os.setxattr(p, "security.capability", cap)
    assert os.getxattr(os.path.join(tdir.brick, "cap"), "security.capability") == cap
    fd = os.open(p, os.O_WRONLY)
    os.pwrite(fd, b"new", 0)
    os.close(fd)
    for d in (tdir.a, tdir.b, tdir.brick):
        try:
            os.getxattr(os.path.join(d, "cap"), "security.capability")
            assert False, f"capability kept in {d}"
        except OSError as e:
            assert e.errno == 61, d  # ENODATA
