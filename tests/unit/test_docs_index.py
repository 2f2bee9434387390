"""The docs' index and the one page for what is verified where: docs/README.md links every Markdown file of
the repository (records/ has its own index, records/README.md, which lists every folder of records/), and the
docs that used to tell what ran where link docs/verification.md instead."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from trt_plugin_kit.interface import REPO_ROOT

INDEX = REPO_ROOT / "docs" / "README.md"
# Not docs: Triton needs the ensemble's version folder to exist, and this file keeps it in git.
NOT_DOCS = {"model_repository/mnist_pipeline/1/README.md", "docs/README.md"}
LINK = re.compile(r"\]\(([^)#\s]+)")


def markdown_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
        capture_output=True, text=True, cwd=REPO_ROOT, check=True,
    ).stdout.split()  # fmt: skip
    return sorted(path for path in listed if (REPO_ROOT / path).is_file())


def linked_from(doc: Path) -> set[Path]:
    return {(doc.parent / target).resolve() for target in LINK.findall(doc.read_text())}


def test_the_index_links_every_doc():
    linked = linked_from(INDEX)
    missing = [
        path
        for path in markdown_files()
        if not path.startswith("records/")
        and path not in NOT_DOCS
        and (REPO_ROOT / path).resolve() not in linked
    ]
    assert not missing, f"docs/README.md does not link {missing}"


def test_the_records_index_lists_every_study():
    listed = set(re.findall(r"^\| `([\w-]+)/` \|", (REPO_ROOT / "records" / "README.md").read_text(), re.M))
    folders = {path.name for path in (REPO_ROOT / "records").iterdir() if path.is_dir()}
    assert folders == listed, f"records/README.md lists {sorted(listed)}, records/ holds {sorted(folders)}"


def test_what_ran_where_is_told_once():
    tellers = [
        "README.md",
        "docs/models.md",
        "docs/serving.md",
        "docs/scaling.md",
        "model_repository/README.md",
    ]
    tellers.append("deploy/kubernetes/README.md")
    verification = (REPO_ROOT / "docs" / "verification.md").resolve()
    not_linking = [doc for doc in tellers if verification not in linked_from(REPO_ROOT / doc)]
    assert not not_linking, f"these docs no longer link docs/verification.md: {not_linking}"
