"""bash completion of the cairn command (extras/bash-completion/cairn),
sourced into a real bash the way bash-completion loads it, with and
without bash-completion's helpers: commands, their words, and volume and
option names asked of a running cairnd."""

import os
import re
import subprocess

import pytest

from cairn_cluster import REPO, Cluster, exe

HOST = "127.0.0.215"
COMPLETION = os.path.join(REPO, "extras", "bash-completion", "cairn")
BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"

SCRIPT = r"""
if [ "$WITH_BC" = 1 ]; then . "$BC"; fi
. "$COMPLETION"
COMP_WORDS=("$@")
COMP_CWORD=$(($# - 1))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
_cairn
printf '%s\n' "${COMPREPLY[@]}"
"""


@pytest.fixture(scope="module")
def pool():
    with Cluster(host=HOST, prefix="compl-") as c:
        c.create_volume("alpha")
        c.create_volume("beta", start=False)
        yield c


@pytest.fixture(params=["plain", "bash-completion"])
def complete(request):
    if request.param == "bash-completion" and not os.path.exists(BASH_COMPLETION):
        pytest.skip("bash-completion is not installed")
    env = dict(os.environ, COMPLETION=COMPLETION, BC=BASH_COMPLETION,
               WITH_BC="1" if request.param == "bash-completion" else "0")

    def run(*words):
        """Completions of the last word of `words` (the command is the
        built cairn)."""
        r = subprocess.run(["bash", "-c", SCRIPT, "bash", exe("cairn"), *words],
                           capture_output=True, text=True, timeout=30, env=env)
        assert r.returncode == 0, r.stderr
        return sorted(w for w in r.stdout.split("\n") if w)

    return run


def test_commands(complete):
    assert complete("") == ["help", "peer", "pool", "volume"]
    assert complete("vol") == ["volume"]
    assert complete("volume", "st") == ["start", "statedump", "status", "stop"]
    assert complete("peer", "") == ["detach", "probe", "status"]
    assert complete("--") == ["--help", "--mode=script", "--progress", "--remote-host", "--ssl",
                              "--ssl-ca", "--ssl-cert", "--ssl-key", "--version", "--xml"]
    assert complete("volume", "heal", "v", "") == [
        "disable", "enable", "full", "info", "split-brain", "statistics"]
    assert complete("volume", "replace-brick", "v", "h:/a", "h:/b", "") == ["commit"]
    assert complete("volume", "replace-brick", "v", "h:/a", "h:/b", "commit", "") == ["force"]
    assert complete("volume", "reset-brick", "v", "h:/a", "") == ["start"]
    assert complete("volume", "add-brick", "v", "") == ["replica"]
    assert complete("volume", "quota", "v", "li") == ["limit-objects", "limit-usage", "list",
                                                      "list-objects"]
    assert complete("volume", "q") == ["quota"]
    assert complete("volume", "remove-brick", "v", "") == ["replica"]
    assert complete("volume", "create", "v", "disp") == ["disperse", "disperse-data"]
    assert complete("volume", "create", "v", "red") == ["redundancy"]
    assert complete("volume", "remove-brick", "v", "replica", "2", "h:/a", "") == ["force"]
    assert complete("volume", "set", "v", "k", "1", "group", "") == sorted(
        "virt distributed-virt metadata-cache nl-cache db-workload small-file".split())


def test_every_command_of_help_completes(complete):
    """The completion's words follow `cairn help`: a command added there
    and not here fails this."""
    text = subprocess.run([exe("cairn"), "help"], capture_output=True, text=True).stdout
    cmds = set(re.findall(r"^(volume|peer|pool) ([a-z-]+)", text, re.M))
    assert len(cmds) >= 17
    for first, second in sorted(cmds):
        assert second in complete(first, ""), f"{first} {second}"


def test_volume_and_option_names_from_cairnd(pool, complete):
    remote = ["--remote-host", pool.remote]
    assert complete(*remote, "volume", "start", "") == ["alpha", "beta"]
    assert complete(*remote, "volume", "status", "") == ["all", "alpha", "beta"]
    assert complete(*remote, "--xml", "volume", "info", "al") == ["all", "alpha"]
    assert complete(*remote, "volume", "set", "alpha", "network.ping") == ["network.ping-timeout"]
    assert "performance.io-thread-count" in complete(*remote, "volume", "get", "beta", "")
    # no cairnd there: no names, and no error either
    assert complete("--remote-host", "127.0.0.216", "volume", "start", "") == []
