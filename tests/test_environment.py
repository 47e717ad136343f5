"""environment.yml (binder) must pin exactly what the project pins."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _pins(lines: list[str]) -> dict[str, str]:
    pins = {}
    for line in lines:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)==([^\s;#]+)\s*", line)
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


def test_environment_yml_parses_and_agrees_with_pins() -> None:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps and "pip" in deps
    pip_section = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    env_pins = _pins(pip_section)
    base = _pins((ROOT / "requirements/base.txt").read_text().splitlines())
    lock = _pins((ROOT / "requirements/lock.txt").read_text().splitlines())
    assert env_pins == base, "environment.yml's pip section must list requirements/base.txt"
    for name, version in base.items():  # the lock resolves the same top-level versions
        assert name in lock and Version(lock[name]) == Version(version), f"{name}: {version} vs lock"
    # torch must come from the CPU index, never a multi-GB CUDA build.
    assert base["torch"] == "2.13.0"
    assert any("download.pytorch.org/whl/cpu" in d for d in pip_section)


def test_pyproject_pins_agree_with_base() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = dict(project["optional-dependencies"])
    # llama.cpp compiles from source (tens of minutes): an opt-in bench engine, kept out of the
    # lock and base on purpose, but pinned like everything else.
    llamacpp = _pins(extras.pop("llamacpp"))
    assert set(llamacpp) == {"llama-cpp-python"} and all(llamacpp.values())
    declared = _pins(project["dependencies"] + sum(extras.values(), []))
    base = _pins((ROOT / "requirements/base.txt").read_text().splitlines())
    assert declared == base
    assert project["scripts"]["chatlab"] == "chatlab.cli:main"
    assert (ROOT / "chatlab" / "py.typed").exists()


def test_binder_postbuild_installs_chatlab() -> None:
    post = (ROOT / "postBuild").read_text()
    assert "requirements/nodeps.txt" in post and "-e ." in post


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci/run").read_text()
    command = "./run.sh test"
    assert command in readme and command in ci


TORCH_RUNTIME = re.compile(r"^(triton|nvidia-.*|cuda-.*)$")  # what torch's registry build brings


@pytest.mark.parametrize("tag", ["312", "313"])
def test_python_312_lock_is_the_311_lock_plus_torch_runtime(tag: str) -> None:
    """Python 3.12 and 3.13 install the same versions as 3.11; only torch's own libraries
    differ (the registry's build of torch 2.13.0 needs its nvidia/cuda packages and triton 3.7.1)."""
    lock = _pins((ROOT / "requirements/lock.txt").read_text().splitlines())
    lock312 = _pins((ROOT / f"requirements/lock-py{tag}.txt").read_text().splitlines())
    assert lock312["torch"] == lock["torch"] == "2.13.0"
    extra = set(lock312) - set(lock)
    assert extra and all(TORCH_RUNTIME.match(n) for n in extra), extra
    assert not set(lock) - set(lock312), "a 3.11 pin is missing from the 3.12 lock"
    changed = {n for n in lock if lock[n] != lock312[n]}
    assert all(TORCH_RUNTIME.match(n) for n in changed), changed
    nodeps = _pins((ROOT / "requirements/nodeps.txt").read_text().splitlines())
    assert not set(nodeps) & set(lock312), "asset packages belong in nodeps.txt only"


def test_requires_python_admits_311_to_313_only() -> None:
    from packaging.specifiers import SpecifierSet

    spec = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
    assert {"3.11.7", "3.12.1", "3.13.0", "3.13.15"} <= set(spec.filter(["3.10.13", "3.11.7", "3.12.1", "3.13.0", "3.13.15"]))
    assert "3.14.0" not in spec and "3.10.13" not in spec


def test_run_sh_keeps_the_312_leg_on_request_and_lab_as_root() -> None:
    run = (ROOT / "run.sh").read_text()
    assert "lock-py$1.txt" in run and ".venv$1" in run  # one venv and lock per version
    assert "CHATLAB_PY312" in run and "test_colab_replica" in run
    assert "02_id_level_rendering" in run and "01_chat_templates_break" in run
    assert "--allow-root" in run and "id -u" in run
    ignored = (ROOT / ".gitignore").read_text().split()
    assert ".venv/" in ignored and ".venv3*/" in ignored
