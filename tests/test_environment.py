"""environment.yml (binder) must pin exactly what the project pins."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

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
    declared = _pins(project["dependencies"] + sum(project["optional-dependencies"].values(), []))
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
