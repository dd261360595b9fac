"""Description of the machine the numbers were measured on."""

import os
import platform
import subprocess


def _first(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        return out.splitlines()[0] if out else None
    except (OSError, subprocess.SubprocessError):
        return None


def describe(workdir):
    cpu = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    fs = _first(["findmnt", "-n", "-o", "FSTYPE,SOURCE", "-T", workdir])
    fs_opts = _first(["findmnt", "-n", "-o", "OPTIONS", "-T", workdir])
    os_rel = None
    try:
        with open("/etc/debian_version") as f:
            os_rel = "Debian " + f.read().strip()
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {
        "hostname": platform.node(),
        "loadavg_at_start": [round(x, 2) for x in load] if load else None,
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_bytes": mem,
        "memory_gib": round(mem / 2**30, 1) if mem else None,
        "kernel": platform.release(),
        "os": os_rel,
        "workdir": workdir,
        "brick_fs": " ".join(fs.split()) if fs else None,
        "brick_fs_options": fs_opts,
        "fio": _first(["fio", "--version"]),
        "tar": _first(["tar", "--version"]),
        "rsync": _first(["rsync", "--version"]),
    }


def one_line(m):
    return (f"{m.get('cores')} cores ({m.get('cpu')}), "
            f"{m.get('memory_gib')} GiB RAM, kernel {m.get('kernel')}, "
            f"{m.get('os')}, bricks/work dir on {m.get('brick_fs')}")
