"""Commit subjects stay under 72 characters (`git log --oneline`, GitHub's list and a terminal show them whole).

The rule holds from the commit that added this file on: the commits that descend from it (`--ancestry-path`), not
the older history, nor a branch merged in that was written before the rule (its merge commit is checked). Run from a
git checkout, as CI runs it (a shallow clone too: the rule is checked on what history it has); from an unpacked
sdist or an installed copy there is no history to read, and only then is the test skipped.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 72  # a subject must be shorter than this
THIS_FILE = "tests/test_commits.py"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def long_subjects(repo: Path, rule_file: str = THIS_FILE) -> list[str]:
    """`<short hash> (<length>) <subject>` for each commit since `rule_file` was added whose subject is too long."""
    added = _git(repo, "log", "--diff-filter=A", "--format=%H", "--", rule_file).split()
    if not added:
        return []  # the rule is not committed yet: nothing is bound by it
    since = added[-1]  # (added again after a removal: the first time counts)
    lines = _git(repo, "log", "--format=%h %s", "-n", "1", since).splitlines()
    lines += _git(repo, "log", "--ancestry-path", "--format=%h %s", f"{since}..HEAD").splitlines()
    found = []
    for line in lines:
        short, _, subject = line.partition(" ")
        if len(subject) >= LIMIT:
            found.append(f"{short} ({len(subject)}) {subject}")
    return found


def _history() -> Path | None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    return ROOT if done.returncode == 0 else None


def test_commit_subjects_are_under_72_characters() -> None:
    repo = _history()
    if repo is None:
        pytest.skip("no git history here (an sdist or installed copy): there are no commits to check")
    assert long_subjects(repo) == [], f"commit subjects must be shorter than {LIMIT} characters"


def test_a_long_subject_after_the_rule_is_found_and_older_history_is_not(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the check above is skipped for the same reason")
    repo = tmp_path / "repo"
    repo.mkdir()
    ident = ["-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]

    def commit(subject: str, path: str) -> None:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(subject, encoding="utf-8")
        _git(repo, "add", path)
        _git(repo, *ident, "commit", "-q", "-m", subject)

    _git(repo, "init", "-q", "-b", "main")
    old = "x" * 90
    commit(old, "old.txt")  # before the rule: not bound by it
    commit("Add the rule", THIS_FILE)
    assert long_subjects(repo) == []
    commit("y" * 71, "a.txt")  # the longest allowed
    assert long_subjects(repo) == []
    commit("z" * 72, "b.txt")
    found = long_subjects(repo)
    assert len(found) == 1 and found[0].endswith(f"(72) {'z' * 72}")
    # a branch written before the rule, merged after it: its own commits are not checked, the merge commit is
    _git(repo, "checkout", "-q", "-b", "older", "HEAD~3")
    commit("w" * 80, "c.txt")
    _git(repo, "checkout", "-q", "main")
    _git(repo, *ident, "merge", "-q", "--no-ff", "-m", "Merge older", "older")
    assert [line.split(" ", 1)[1] for line in long_subjects(repo)] == [f"(72) {'z' * 72}"]
