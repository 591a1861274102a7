"""The documentation site (issue 23): ``mkdocs build --strict`` over ``mkdocs.yml`` and
docs/ passes with no warning (a broken link or anchor, a page missing from the nav or a
nav entry without its page fails it), and the README, the front door GitHub shows, stays
short and its links land on a file and a heading that exist."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

README = ROOT / "README.md"
README_MAX_LINES = 400
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def build(tmp_path: Path, config: Path = ROOT / "mkdocs.yml") -> subprocess.CompletedProcess:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs, "mkdocs is a test dependency (pyproject.toml, the test extra)"
    return subprocess.run([mkdocs, "build", "--strict", "-f", str(config),
                           "-d", str(tmp_path / "site")],
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path),
                               "NO_MKDOCS_2_WARNING": "1"})


def warnings(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (result.stdout + result.stderr).splitlines()
            if line.startswith(("WARNING", "ERROR"))]


def test_the_site_builds_strict_with_no_warning(tmp_path):
    r = build(tmp_path)
    assert r.returncode == 0 and not warnings(r), r.stdout + r.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "configuration" / "index.html").is_file()


def test_every_page_is_in_the_nav():
    """A page left out of the nav is a warning too (``omitted_files``); this names it."""
    nav = (ROOT / "mkdocs.yml").read_text()
    listed = set(re.findall(r":\s*(\S+\.md)\s*$", nav, re.M))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages - listed == set()
    assert listed - pages == set()


def test_the_strict_build_fails_on_a_broken_link_or_anchor(tmp_path):
    """The check above can fail: a copy of the site with a link to a missing page, a missing
    anchor, and a page left out of the nav gets one warning each and a non-zero exit."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs", symlinks=True)
    shutil.copytree(ROOT / "screenshots", tmp_path / "screenshots")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "carbon.md"
    page.write_text(page.read_text() + "\nSee [gone](gone.md) and [no such part]"
                    "(configuration.md#no-such-heading).\n")
    (tmp_path / "docs" / "stray.md").write_text("# Stray\n")
    r = build(tmp_path, tmp_path / "mkdocs.yml")
    assert r.returncode != 0
    found = "\n".join(warnings(r))
    assert "gone.md" in found
    assert "#no-such-heading" in found
    assert 'not included in the "nav"' in found
    assert "stray.md" in r.stdout + r.stderr  # listed on the lines after that warning


# -- the README -------------------------------------------------------------------------

def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to ``-``."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def headings(page: Path) -> set[str]:
    found, fence = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            found.add(github_slug(line.lstrip("#")))
    return found


def broken_links(page: Path) -> list[str]:
    """Each relative link of ``page`` (outside code) whose file or heading is missing."""
    bad, fence = [], False
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fence = not fence
            continue
        if fence:
            continue
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not ours to check offline
            path, _, anchor = target.partition("#")
            dest = (page.parent / path) if path else page
            if not dest.exists():
                bad.append(f"{page.name}:{n}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in headings(dest):
                bad.append(f"{page.name}:{n}: {target} (no such heading)")
    return bad


def test_the_readme_is_a_front_door():
    """At most 400 lines; the set-up commands, the first five minutes, the contents and
    the limits are there, and it links the site's home page."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    for heading in ("## Set up", "## The first five minutes", "## Documentation", "## Limits"):
        assert f"\n{heading}\n" in text
    assert ".venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest" in text
    assert "docs/index.md" in {t.partition("#")[0] for t in LINK.findall(text)}


def test_the_readme_links_land(tmp_path):
    assert broken_links(README) == []


def test_the_link_check_can_fail(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "carbon.md").write_text("# Carbon\n\n## Live intensity\n")
    page = tmp_path / "README.md"
    page.write_text("# x\n\n## Step 5: permissions\n\n[a](docs/carbon.md#live-intensity) "
                    "[b](docs/carbon.md#gone) [c](docs/nope.md) [d](#step-5-permissions) "
                    "[e](#step-6)\n`[f](in-code.md)` [g](https://example.org/x)\n```\n"
                    "[h](fenced.md)\n```\n")
    assert broken_links(page) == ["README.md:5: docs/carbon.md#gone (no such heading)",
                                  "README.md:5: docs/nope.md (no such file)",
                                  "README.md:5: #step-6 (no such heading)"]


@pytest.mark.parametrize("page", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_pages_name_no_readme_section(page):
    """The reference left the README: a page that still says "see the README's X" sends
    the reader to a section that is no longer there."""
    assert not re.search(r"README[,'’]s? \"|README, \"", page.read_text(encoding="utf-8"))


def section(page: Path, heading: str) -> str:
    return page.read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_site_home_has_the_readmes_limits():
    """The limits are said twice, on GitHub's front page and the site's: the same words
    (links relative to each page), so that one is never edited alone."""
    assert section(ROOT / "docs" / "index.md", "Limits").strip() == \
        section(README, "Limits").replace("](docs/", "](").strip()
