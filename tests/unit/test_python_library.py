"""Where the CPU variant finds libpython for Triton's Python backend stub (serving.python_shared_library_dir).

A Python built with --enable-shared has libpython in LIBDIR; Debian's and Ubuntu's python3 is linked
statically and the distribution ships libpython3.X.so.1.0 in package libpython3.X (the unversioned .so
only with -dev). Both must be accepted, and a Python with neither must get a message that says what to do.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.serving import server as serving
from trt_plugin_kit.serving.host import ServingError
from trt_plugin_kit.serving.server import python_shared_library_dir

MINOR = f"{sys.version_info.major}.{sys.version_info.minor}"
SONAME = f"libpython{MINOR}{sys.abiflags}.so.1.0"


def fake_sysconfig(monkeypatch, **config) -> None:
    monkeypatch.setattr(serving.sysconfig, "get_config_var", lambda name: config.get(name))


def test_this_interpreter_has_a_shared_libpython():
    directory = python_shared_library_dir()
    assert list(directory.glob(f"libpython{MINOR}*.so*")), directory


def test_debian_layout_without_the_dev_package(tmp_path, monkeypatch):
    """Debian/Ubuntu: LDLIBRARY names the -dev symlink, only the soname is installed (libpython3.X)."""
    multiarch_dir = tmp_path / "usr" / "lib" / "x86_64-linux-gnu"
    multiarch_dir.mkdir(parents=True)
    (multiarch_dir / f"libpython{MINOR}.a").touch()
    (multiarch_dir / SONAME).touch()
    fake_sysconfig(
        monkeypatch,
        Py_ENABLE_SHARED=0,
        LIBDIR=str(multiarch_dir),
        LDLIBRARY=f"libpython{MINOR}.so",
        INSTSONAME=SONAME,
        MULTIARCH="x86_64-linux-gnu",
    )
    assert python_shared_library_dir() == multiarch_dir


def test_library_under_the_multiarch_folder_of_libdir(tmp_path, monkeypatch):
    """A static build whose configuration names only the archive: the soname is looked for by version."""
    (tmp_path / "x86_64-linux-gnu").mkdir()
    (tmp_path / "x86_64-linux-gnu" / SONAME).touch()
    fake_sysconfig(
        monkeypatch, LIBDIR=str(tmp_path), LDLIBRARY=f"libpython{MINOR}.a", MULTIARCH="x86_64-linux-gnu"
    )
    assert python_shared_library_dir() == tmp_path / "x86_64-linux-gnu"


def test_static_python_without_libpython_gets_a_clear_message(tmp_path, monkeypatch):
    (tmp_path / f"libpython{MINOR}.a").touch()
    fake_sysconfig(monkeypatch, LIBDIR=str(tmp_path), LDLIBRARY=f"libpython{MINOR}.a", Py_ENABLE_SHARED=0)
    with pytest.raises(ServingError) as error:
        python_shared_library_dir()
    message = str(error.value)
    assert str(tmp_path) in message
    assert f"apt-get install libpython{MINOR}" in message and "--enable-shared" in message


def test_no_libdir_at_all(monkeypatch):
    fake_sysconfig(monkeypatch)
    with pytest.raises(ServingError, match="no LIBDIR"):
        python_shared_library_dir()


def _debian_python() -> str | None:
    """/usr/bin/python3 when it is the distribution's (statically linked, libpython package installed)."""
    python = shutil.which("python3", path="/usr/bin")
    if python is None:
        return None
    probe = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_config_var('LIBDIR'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    libdir = Path(probe.stdout.strip())
    return python if probe.returncode == 0 and list(libdir.glob("libpython3.*.so.1.0")) else None


@pytest.mark.skipif(_debian_python() is None, reason="no distribution python3 with libpython3.X here")
def test_the_distribution_python3_is_accepted():
    """The real case of the issue: the system python3 of Debian/Ubuntu (serving imports only the stdlib)."""
    code = (
        f"import sys; sys.path.insert(0, {str(REPO_ROOT)!r}); "
        "from trt_plugin_kit.serving.server import python_shared_library_dir; "
        "print(python_shared_library_dir())"
    )
    result = subprocess.run([_debian_python(), "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert list(Path(result.stdout.strip()).glob("libpython3.*.so.1.0")), result.stdout
