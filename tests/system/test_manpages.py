"""The man pages (man/*.8) against the programs: every option a program's
--help names is in the OPTIONS section of its page and the other way round
(for the cairn command, also every command), so the two cannot drift apart
unnoticed; and groff and man render every page without a warning."""

import os
import re
import subprocess

import pytest

from cairn_cluster import REPO, exe

MAN = os.path.join(REPO, "man")
PROGRAMS = ["cairnd", "cairn", "cairn-fuse", "mount.cairn", "cairn-brickd", "cairn-shd"]

# a dashed option: not inside a word, a number range or a path
DASHED = re.compile(r"(?<![\w/.\-])(--?[A-Za-z][A-Za-z\-]*)")
# a FUSE-style option: -o NAME
O_NAME = re.compile(r"(?<![\w\-])-o\s+([a-z][a-z_\-]*)")
COMMAND = re.compile(r"^\s*(volume|peer|pool)\s+([a-z][a-z\-]*)", re.M)


def render(page):
    """The page as plain text, one line per paragraph (no hyphenation)."""
    r = subprocess.run(["groff", "-man", "-Tascii", "-rLL=1000n", "-P-c", "-P-b", "-P-o",
                        "-P-u", page], capture_output=True, text=True, check=True)
    return r.stdout


def section(text, name):
    m = re.search(rf"^{name}\n(.*?)(?=^[A-Z][A-Z ]+\n|\Z)", text, re.M | re.S)
    assert m, f"no {name} section"
    return m.group(1)


def help_text(prog):
    r = subprocess.run([exe(prog), "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, f"{prog} --help exited {r.returncode}: {r.stderr}"
    assert r.stdout.strip(), f"{prog} --help printed nothing on stdout"
    return r.stdout


def options(text):
    return set(DASHED.findall(text)) | {"-o " + n for n in O_NAME.findall(text)}


@pytest.mark.parametrize("prog", PROGRAMS)
def test_help_and_man_page_name_the_same_options(prog):
    page = os.path.join(MAN, f"{prog}.8")
    assert os.path.exists(page), f"{prog} has no man page"
    in_help = options(help_text(prog))
    in_man = options(section(render(page), "OPTIONS"))
    assert in_help, prog
    assert in_help - in_man == set(), f"{prog}: in --help, not in the man page"
    assert in_man - in_help == set(), f"{prog}: in the man page, not in --help"


def test_cairn_commands_in_help_and_man_page():
    in_help = set(COMMAND.findall(help_text("cairn")))
    in_man = set(COMMAND.findall(section(render(os.path.join(MAN, "cairn.8")), "COMMANDS")))
    assert len(in_help) >= 17, in_help
    assert in_help == in_man


@pytest.mark.parametrize("page", sorted(p for p in os.listdir(MAN) if p.endswith(".8")))
def test_man_page_renders_without_warnings(page):
    path = os.path.join(MAN, page)
    r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", path], capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    r = subprocess.run(["man", "--warnings", "-l", path], capture_output=True, text=True,
                       env=dict(os.environ, MANPAGER="cat", MANWIDTH="80"))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert page.split(".8")[0].upper() in r.stdout.upper()
