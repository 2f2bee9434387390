"""The one place that picks how a Debian root is made (the compose test's base image, perf_analyzer's root):
mmdebstrap first, debootstrap where only it is installed, a clear error where neither is."""

from __future__ import annotations

from pathlib import Path

import pytest

from trt_plugin_kit.deploy import debian_root


def only_on_path(monkeypatch, tmp_path: Path, *tools: str) -> None:
    for name in tools:
        (tmp_path / name).write_text("#!/bin/sh\nexit 0\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))


def test_mmdebstrap_is_preferred_and_the_mirror_can_be_overridden(monkeypatch, tmp_path):
    only_on_path(monkeypatch, tmp_path, "debootstrap", "mmdebstrap")
    monkeypatch.setenv("DEBIAN_MIRROR", "http://mirror.example/debian")
    command = debian_root.command("trixie", "python3,zlib1g", tmp_path / "root")
    assert command == [
        "mmdebstrap", "--variant=minbase", "--include=python3,zlib1g", "trixie", str(tmp_path / "root"),
        "http://mirror.example/debian",
    ]  # fmt: skip


def test_debootstrap_where_only_it_is_installed(monkeypatch, tmp_path):
    only_on_path(monkeypatch, tmp_path, "debootstrap")
    monkeypatch.delenv("DEBIAN_MIRROR", raising=False)
    command = debian_root.command("bookworm", "python3", tmp_path)
    assert command[0] == "debootstrap" and command[-1] == debian_root.DEFAULT_MIRROR


def test_neither_tool_says_what_to_install(monkeypatch, tmp_path):
    only_on_path(monkeypatch, tmp_path)
    assert debian_root.tool() is None
    with pytest.raises(FileNotFoundError, match="apt-get install mmdebstrap"):
        debian_root.command("bookworm", "python3", tmp_path)


def test_apt_caches_are_cleared_and_nothing_else(tmp_path):
    for name in ("var/cache/apt/archives/python3.deb", "var/lib/apt/lists/deb.debian.org_Packages"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    (tmp_path / "var/cache/apt/archives/partial").mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/os-release").write_text("x")
    debian_root.clear_apt_caches(tmp_path)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["etc/os-release"] and (tmp_path / "var/cache/apt/archives/partial").is_dir()
