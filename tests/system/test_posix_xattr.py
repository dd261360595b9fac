"""Extended attributes in the user., trusted. and security. namespaces."""

import errno
import os

import pytest


def mkfile(tdir, name="f"):
    p = os.path.join(tdir.a, name)
    with open(p, "wb") as f:
        f.write(b"x")
    return p


@pytest.mark.parametrize("ns", ["user", "trusted", "security"])
def test_xattr_set_get_list_remove(tdir, ns):
    p = mkfile(tdir)
    name = f"{ns}.app.test"
    value = b"\x00binary\xffvalue"
    os.setxattr(p, name, value)
    assert os.getxattr(p, name) == value
    assert name in os.listxattr(p)
    q = os.path.join(tdir.b, "f")
    assert os.getxattr(q, name) == value
    assert name in os.listxattr(q)
    os.removexattr(p, name)
    with pytest.raises(OSError) as e:
        os.getxattr(p, name)
    assert e.value.errno == errno.ENODATA
    assert name not in os.listxattr(p)
    with pytest.raises(OSError) as e:
        os.getxattr(q, name)
    assert e.value.errno == errno.ENODATA


def test_xattr_create_flag_eexist(tdir):
    p = mkfile(tdir)
    os.setxattr(p, "user.a", b"1", os.XATTR_CREATE)
    with pytest.raises(FileExistsError):
        os.setxattr(p, "user.a", b"2", os.XATTR_CREATE)
    assert os.getxattr(p, "user.a") == b"1"


def test_xattr_replace_flag_enodata(tdir):
    p = mkfile(tdir)
    with pytest.raises(OSError) as e:
        os.setxattr(p, "user.missing", b"v", os.XATTR_REPLACE)
    assert e.value.errno == errno.ENODATA
    os.setxattr(p, "user.present", b"v1")
    os.setxattr(p, "user.present", b"v2", os.XATTR_REPLACE)
    assert os.getxattr(p, "user.present") == b"v2"


def test_xattr_get_missing_enodata(tdir):
    p = mkfile(tdir)
    with pytest.raises(OSError) as e:
        os.getxattr(p, "user.nothing")
    assert e.value.errno == errno.ENODATA


def test_xattr_remove_missing_enodata(tdir):
    p = mkfile(tdir)
    with pytest.raises(OSError) as e:
        os.removexattr(p, "user.nothing")
    assert e.value.errno == errno.ENODATA


def test_xattr_overwrite_and_empty_value(tdir):
    p = mkfile(tdir)
    os.setxattr(p, "user.v", b"long value " * 100)
    os.setxattr(p, "user.v", b"short")
    assert os.getxattr(p, "user.v") == b"short"
    os.setxattr(p, "user.empty", b"")
    assert os.getxattr(p, "user.empty") == b""


def test_xattr_large_value(tdir):
    p = mkfile(tdir)
    value = os.urandom(3000)
    os.setxattr(p, "user.big", value)
    assert os.getxattr(os.path.join(tdir.b, "f"), "user.big") == value


def test_xattr_many_names_listed(tdir):
    p = mkfile(tdir)
    names = {f"user.n{i:03d}" for i in range(50)}
    for n in names:
        os.setxattr(p, n, n.encode())
    listed = set(os.listxattr(os.path.join(tdir.b, "f")))
    assert names <= listed
    # the brick's private metadata never shows through
    assert not [n for n in listed if "cairn" in n.lower() and n not in names]


def test_xattr_on_directory(tdir):
    d = os.path.join(tdir.a, "d")
    os.mkdir(d)
    os.setxattr(d, "user.dir", b"yes")
    assert os.getxattr(os.path.join(tdir.b, "d"), "user.dir") == b"yes"


def test_xattr_on_symlink_nofollow(tdir):
    target = mkfile(tdir, "t")
    link = os.path.join(tdir.a, "l")
    os.symlink("t", link)
    os.setxattr(link, "trusted.onlink", b"L", follow_symlinks=False)
    assert os.getxattr(link, "trusted.onlink", follow_symlinks=False) == b"L"
    with pytest.raises(OSError) as e:
        os.getxattr(target, "trusted.onlink")
    assert e.value.errno == errno.ENODATA


def test_xattr_no_internal_names_visible(tdir):
    p = mkfile(tdir)
    listed = os.listxattr(p)
    assert [n for n in listed if n.startswith("trusted.cairn")] == [], listed


def test_xattr_user_namespace_on_fifo_eperm(tdir):
    p = os.path.join(tdir.a, "fifo")
    os.mkfifo(p)
    with pytest.raises(OSError) as e:
        os.setxattr(p, "user.x", b"1")
    assert e.value.errno in (errno.EPERM, errno.ENOTSUP)


def test_xattr_invalid_namespace(tdir):
    p = mkfile(tdir)
    with pytest.raises(OSError) as e:
        os.setxattr(p, "bogus.name", b"1")
    assert e.value.errno in (errno.EOPNOTSUPP, errno.ENOTSUP)


def test_selinux_label_unsupported_by_default(tdir):
    """Like GlusterFS's FUSE client, a mount without -o selinux does not
    support the SELinux label: ls -l and cp -a stop asking for it after one
    EOPNOTSUPP instead of paying a round trip per file."""
    p = mkfile(tdir)
    for call in (lambda: os.getxattr(p, "security.selinux"),
                 lambda: os.setxattr(p, "security.selinux", b"system_u:object_r:x_t:s0"),
                 lambda: os.removexattr(p, "security.selinux")):
        with pytest.raises(OSError) as e:
            call()
        assert e.value.errno == errno.EOPNOTSUPP


def test_selinux_label_stored_with_mount_option(vol, tdir):
    mkfile(tdir)  # makes f
    m = vol.cluster.mount(vol.name, os.path.join(vol.cluster.root, "m-selinux"),
                          opts=["selinux"])
    try:
        q = os.path.join(m.path, tdir.name, "f")
        label = b"system_u:object_r:cairn_test_t:s0"
        os.setxattr(q, "security.selinux", label)
        assert os.getxattr(q, "security.selinux") == label
        assert "security.selinux" in os.listxattr(q)
        # the brick keeps it as a plain attribute of the file
        assert os.getxattr(os.path.join(tdir.brick, "f"), "security.selinux") == label
        os.removexattr(q, "security.selinux")
        with pytest.raises(OSError) as e:
            os.getxattr(q, "security.selinux")
        assert e.value.errno == errno.ENODATA
    finally:
        m.stop()
