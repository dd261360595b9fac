"""Inputs prepared once on the local disk and cached in <workdir>/cache:
the generated small-file tree and uncompressed kernel tar files, each with a
reference manifest for verification."""

import json
import os

from cairnbench import gen, util

KERNEL_XZ = "/usr/src/linux-source-6.1.tar.xz"
KERNEL_TOP = "linux-source-6.1"


def _load_manifest(path):
    with open(path) as f:
        return {k: tuple(v) for k, v in json.load(f).items()}


def _save_manifest(path, manifest):
    with open(path + ".tmp", "w") as f:
        json.dump(manifest, f)
    os.rename(path + ".tmp", path)


class Assets:
    def __init__(self, cache_dir, nfiles):
        self.cache = cache_dir
        self.nfiles = nfiles
        self._tree = None
        self._tars = {}

    def tree(self):
        """(path, manifest) of the generated tree."""
        if self._tree is None:
            self._tree = gen.cached_tree(self.cache, self.nfiles)
        return self._tree

    def _kernel_ref(self):
        """The kernel source extracted once (reference copy)."""
        ref = os.path.join(self.cache, "kernel-ref")
        done = ref + ".done"
        if not os.path.exists(done):
            if not os.path.exists(KERNEL_XZ):
                raise util.BenchFailure(f"{KERNEL_XZ} missing "
                                        "(apt-get install linux-source-6.1)")
            util.log("extracting the kernel source once (reference copy)")
            util.rmtree(ref)
            os.makedirs(ref)
            util.run(["tar", "-xJf", KERNEL_XZ, "-C", ref], timeout=1800,
                     what="tar xJf kernel")
            open(done, "w").close()
        return os.path.join(ref, KERNEL_TOP)

    def tar(self, which):
        """(tar path, member top dir, manifest) for which in
        ("include", "kernel"). The tar is uncompressed so that decompression
        is not timed; the manifest describes the extracted top dir."""
        if which in self._tars:
            return self._tars[which]
        tarp = os.path.join(self.cache, f"linux-6.1-{which}.tar")
        mp = tarp + ".manifest.json"
        if not (os.path.exists(tarp) and os.path.exists(mp)):
            src = self._kernel_ref()
            if which == "include":
                parent, top = src, "include"
            else:
                parent, top = os.path.dirname(src), KERNEL_TOP
            util.log(f"building {tarp}")
            util.run(["tar", "-cf", tarp + ".tmp", "-C", parent, top],
                     timeout=1800, what="tar cf")
            os.rename(tarp + ".tmp", tarp)
            # The manifest of a test extraction, made the same way as the
            # timed one, so both sides see identical tar semantics.
            scratch = os.path.join(self.cache, "scratch-" + which)
            util.rmtree(scratch)
            os.makedirs(scratch)
            util.run(["tar", "-xf", tarp, "-C", scratch], timeout=1800,
                     what="tar xf reference")
            _save_manifest(mp, util.tree_manifest(
                os.path.join(scratch, top), mtimes=True))
            util.rmtree(scratch)
        manifest = _load_manifest(mp)
        self._tars[which] = (tarp, which if which == "include" else
                             KERNEL_TOP, manifest)
        return self._tars[which]
