"""trt_plugin_kit/engines/artifact_checks.py: the builder's and the serving image's TensorRT compared in full,
the plugin library's links, its headers' version read from the file, and the serving start's check (issue 45).

No TensorRT runtime runs here: the comparison and the parsing are checked on their own, the commands with the
runtime's version stood in (monkeypatch) and the real ``ldd`` on the library `make plugins` built (which
links no libnvinfer here: the check must say so). Creators against a real registry:
tests/library/test_tensorrt_rtx.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trt_plugin_kit.engines import artifact_checks as checks
from trt_plugin_kit.engines import library_version
from trt_plugin_kit.interface import PLUGIN_LIBRARY_NAME, REPO_ROOT

LDD_OK = """\tlinux-vdso.so.1 (0x00007ffd)
\tlibnvinfer.so.11 => /usr/lib/x86_64-linux-gnu/libnvinfer.so.11 (0x00007f01)
\tlibcudart.so.13 => /usr/local/cuda/lib64/libcudart.so.13 (0x00007f02)
\tlibcublasLt.so.13 => /usr/local/cuda/lib64/libcublasLt.so.13 (0x00007f03)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f04)
"""
LDD_MISSING = "\tlibcudart.so.13 => not found\n\tlibnvinfer.so.10 => /usr/lib/libnvinfer.so.10 (0x1)\n"


@pytest.mark.parametrize(
    ("built", "serving", "same"),
    [
        ("11.3.0.12", "11.3.0.12", True),
        ("11.3.0.12\n", "11.3.0.12", True),  # the stamp file's newline
        ("11.3.0.12", "11.3.0.13", False),  # another build of the same release: engines do not carry over
        ("11.3.0.12", "11.30.0.12", False),
        ("10.13.3.9", "11.3.0.12", False),
        ("11.3.0", "11.3.0", False),  # no build number: the match cannot be proven
    ],
)
def test_versions_match_only_in_full(built, serving, same):
    message = checks.compare_versions(built, serving)
    assert (message is None) == same, message
    if not same and "." in built and built.strip() != serving:
        assert built.strip() in message and serving in message and "x-ngc-release" in message


@pytest.mark.parametrize("text", ["", "eleven", "11..3", "v11.3"])
def test_a_stamp_that_is_no_version_is_refused_with_its_text(text):
    with pytest.raises(checks.CheckFailed, match="not a TensorRT version"):
        library_version.parse_version(text)


def test_a_package_style_suffix_is_ignored():
    assert library_version.parse_version("10.13.3.9-1+cuda13.0") == (10, 13, 3, 9)


def test_ldd_output_is_read_into_names_and_paths():
    linked = checks.ldd_libraries(LDD_OK)
    assert linked["libnvinfer.so.11"] == "/usr/lib/x86_64-linux-gnu/libnvinfer.so.11"
    assert set(linked) == {"libnvinfer.so.11", "libcudart.so.13", "libcublasLt.so.13"}
    assert checks.ldd_libraries(LDD_MISSING)["libcudart.so.13"] is None


def test_link_problems_name_the_missing_libnvinfer_and_what_does_not_resolve():
    library = Path("/x/libtrt_plugin_kit.so")
    assert checks.link_problems(library, checks.ldd_libraries(LDD_OK), "libnvinfer.so.11") == []
    problems = checks.link_problems(library, checks.ldd_libraries(LDD_MISSING), "libnvinfer.so.11")
    assert len(problems) == 2
    assert "does not link libnvinfer.so.11" in problems[0] and "it links libnvinfer.so.10" in problems[0]
    assert "cannot find libcudart.so.13" in problems[1]
    problems = checks.link_problems(library, {"libc.so.6": "/lib/libc.so.6"}, "libnvinfer.so.10")
    assert problems and "it links no libnvinfer" in problems[0]


def built_library() -> Path:
    build = Path(os.environ.get("BUILD_DIR", REPO_ROOT / "build"))
    build = build if build.is_absolute() else REPO_ROOT / build
    found = sorted(build.glob(f"trt-*/{PLUGIN_LIBRARY_NAME}"))
    if not found:
        pytest.skip(f"no {PLUGIN_LIBRARY_NAME} under {build}/trt-*/ (make plugins builds it)")
    return found[0]


def test_the_real_library_says_which_headers_it_was_built_against():
    library = built_library()
    version = library_version.headers_version(library)
    assert version and version.startswith(library.parent.name.removeprefix("trt-")), version
    assert len(library_version.parse_version(version)) == 4  # major.minor.patch.build of NvInferVersion.h


def test_a_library_that_is_not_ours_has_no_headers_version(tmp_path):
    other = tmp_path / "libother.so"
    other.write_bytes(b"\x7fELF" + b"\0" * 64 + b"trt_plugin_kit built against TensorRT headers ")
    assert library_version.headers_version(other) is None


def test_the_real_library_built_without_libnvinfer_fails_the_links_check_saying_why():
    """make plugins here has no libnvinfer to link: the library would load in Triton and register nothing."""
    library = built_library()
    with pytest.raises(checks.CheckFailed) as error:
        checks.check_links(library, "libnvinfer.so.10")
    assert f"{library} does not link libnvinfer.so.10" in str(error.value)
    assert "it links no libnvinfer" in str(error.value)


def fake_ldd(directory: Path, output: str) -> None:
    directory.mkdir(exist_ok=True)
    ldd = directory / "ldd"
    ldd.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}EOF\n")
    ldd.chmod(0o755)


@pytest.fixture
def serving_image(tmp_path, monkeypatch):
    """Artifacts as the builder leaves them, a serving image with TensorRT 11.3.0.12 and a library whose
    links resolve (ldd stood in by a script printing LDD_OK)."""
    artifacts = tmp_path / "artifacts"
    (artifacts / "plugins").mkdir(parents=True)
    library = artifacts / "plugins" / PLUGIN_LIBRARY_NAME
    library.write_bytes(b"\x7fELF")
    (artifacts / checks.VERSION_STAMP).write_text("11.3.0.12\n")
    fake_ldd(tmp_path / "bin", LDD_OK)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setattr(checks, "runtime_version", lambda: ("libnvinfer.so.11", "11.3.0.12"))
    return artifacts, library


def test_serving_starts_on_the_builder_s_tensorrt(serving_image, capsys):
    artifacts, library = serving_image
    assert checks.main(["serving", "--artifacts-dir", str(artifacts), "--library", str(library)]) == 0
    out = capsys.readouterr().out
    assert "ok: TensorRT 11.3.0.12: the artifacts were built with it" in out
    assert f"ok: {library}: links libnvinfer.so.11" in out


def test_serving_refuses_artifacts_of_another_tensorrt(serving_image, capsys):
    artifacts, library = serving_image
    (artifacts / checks.VERSION_STAMP).write_text("11.2.1.2\n")
    assert checks.main(["serving", "--artifacts-dir", str(artifacts), "--library", str(library)]) == 1
    error = capsys.readouterr().err
    assert "built with TensorRT 11.2.1.2, this container serves with TensorRT 11.3.0.12" in error


def test_serving_refuses_before_the_builder_completed(serving_image, capsys):
    artifacts, library = serving_image
    (artifacts / checks.VERSION_STAMP).unlink()
    assert checks.main(["serving", "--artifacts-dir", str(artifacts), "--library", str(library)]) == 1
    assert "the builder has not completed" in capsys.readouterr().err


def test_serving_refuses_a_library_whose_links_do_not_resolve_here(serving_image, tmp_path, capsys):
    artifacts, library = serving_image
    fake_ldd(tmp_path / "bin", LDD_MISSING)
    assert checks.main(["serving", "--artifacts-dir", str(artifacts), "--library", str(library)]) == 1
    error = capsys.readouterr().err
    assert "does not link libnvinfer.so.11" in error and "cannot find libcudart.so.13" in error


def test_without_tensorrt_every_command_says_so_with_exit_3():
    for command in (["version"], ["library", "x.so"], ["serving", "--artifacts-dir", ".", "--library", "x"]):
        result = subprocess.run(
            [sys.executable, "-m", "trt_plugin_kit.engines.artifact_checks", *command],
            capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
        )  # fmt: skip
        assert result.returncode == 3, (command, result.stderr)
        assert "no TensorRT runtime here (libnvinfer.so.11 / libnvinfer.so.10 not loadable)" in result.stderr
        assert "Traceback" not in result.stderr


def test_build_engines_refuses_a_library_of_another_tensorrt_major_before_loading_it(monkeypatch):
    """Loading runs the library's registrations, which would call the registry through another major's
    virtual table: the load path reads the headers' version from the file and stops first."""
    from trt_plugin_kit.engines import builder
    from trt_plugin_kit.engines.errors import BuildFailure
    from trt_plugin_kit.engines.plugin_config import PluginLibrary

    library = built_library()
    major = library_version.parse_version(library_version.headers_version(library))[0]
    api = type("Api", (), {"name": "TensorRT", "version": f"{major + 1}.0.0.1", "custom_plugins_limit": "",
                           "plugin_interface_major": major + 1})()  # fmt: skip
    monkeypatch.setattr(builder.ctypes, "CDLL", lambda *a, **k: pytest.fail("the library was loaded"))
    with pytest.raises(BuildFailure, match=rf"compiled against TensorRT {major}\.[\d.]+ headers, this is "):
        builder.load_library_once(api, registry=None, library=PluginLibrary(library))


@pytest.mark.parametrize(
    ("tag", "device", "name"),
    [
        ("trt10.13.3.9", "NVIDIA H200", "timing_cache_trt10.13.3.9_NVIDIA-H200.bin"),
        ("trt11.3.0.12", "NVIDIA GeForce RTX 4090", "timing_cache_trt11.3.0.12_NVIDIA-GeForce-RTX-4090.bin"),
        ("trt11.3.0.12", "NVIDIA A100-SXM4-80GB", "timing_cache_trt11.3.0.12_NVIDIA-A100-SXM4-80GB.bin"),
        ("rtx1.7.1.116", None, "timing_cache_rtx1.7.1.116_no-GPU.bin"),
        ("trt11.3.0.12", "../../etc/x", "timing_cache_trt11.3.0.12_..-..-etc-x.bin"),  # no separator
    ],
)
def test_the_timing_cache_is_named_after_the_tensorrt_release_and_the_gpu_model(tag, device, name):
    from trt_plugin_kit.engines.builder import timing_cache_name

    assert timing_cache_name(tag, device) == name
    assert "/" not in timing_cache_name(tag, device)
