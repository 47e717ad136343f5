"""The first cell's Colab branch, run for real in a child Python with `google.colab` in
sys.modules: it clones CHATLAB_REPO, unpacks an uploaded zip, reuses a checkout on a second run,
and a failed clone is one message naming the URL and the other way in, leaving nothing behind."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from chatlab.lab import session

# A stand-in repository: the cell only needs chatlab.lab.session.setup to import and run.
FAKE_SESSION = "def setup():\n    print('fake setup from', __file__)\n    return 'colab'\n"


def fake_repo(root: Path) -> Path:
    (root / "chatlab" / "lab").mkdir(parents=True)
    (root / "chatlab" / "__init__.py").write_text("")
    (root / "chatlab" / "lab" / "__init__.py").write_text("")
    (root / "chatlab" / "lab" / "session.py").write_text(FAKE_SESSION)
    return root


def run_cell(tmp_path: Path, repo: str, clone: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(CHATLAB_REPO=repo, CHATLAB_CLONE=str(clone), GIT_TERMINAL_PROMPT="0")
    code = ("import sys, types; sys.modules['google.colab'] = types.ModuleType('google.colab')\n"
            + session.BOOTSTRAP + "\nprint('where =', where)\n")
    return subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_failed_clone_names_the_url_and_the_upload_and_leaves_nothing(tmp_path: Path) -> None:
    clone = tmp_path / "content" / "chatlab"
    clone.parent.mkdir()
    missing = str(tmp_path / "no-such-repository")
    proc = run_cell(tmp_path, missing, clone)
    assert proc.returncode == 1, proc.stderr
    assert f"could not clone {missing}" in proc.stderr
    assert "CHATLAB_REPO" in proc.stderr and "upload the repository folder" in proc.stderr
    assert "zip" in proc.stderr and "Traceback" not in proc.stderr
    assert not clone.exists()


def test_the_cell_clones_chatlab_repo_then_reuses_the_checkout(tmp_path: Path) -> None:
    origin = fake_repo(tmp_path / "origin")
    git = ["git", "-C", str(origin), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "fake"], check=True)
    clone = tmp_path / "content" / "chatlab"
    clone.parent.mkdir()
    first = run_cell(tmp_path, str(origin), clone)
    assert first.returncode == 0, first.stderr
    assert f"fake setup from {clone}/chatlab/lab/session.py" in first.stdout and "where = colab" in first.stdout
    # A second run: the checkout is there, so no clone (the origin is gone and it still works).
    (origin / "chatlab" / "lab" / "session.py").unlink()
    second = run_cell(tmp_path, str(tmp_path / "gone"), clone)
    assert second.returncode == 0, second.stderr
    assert "fake setup" in second.stdout


@pytest.mark.parametrize("top", ["chatlab-main/", ""])
def test_an_uploaded_zip_is_unpacked_instead_of_cloning(tmp_path: Path, top: str) -> None:
    src = fake_repo(tmp_path / "src")
    content = tmp_path / "content"
    content.mkdir()
    with zipfile.ZipFile(content / "chatlab-main.zip", "w") as z:  # GitHub's zip, or one of the folder
        for f in src.rglob("*"):
            z.write(f, top + str(f.relative_to(src)))
    clone = content / "chatlab"
    proc = run_cell(tmp_path, str(tmp_path / "unreachable"), clone)
    assert proc.returncode == 0, proc.stderr
    assert (clone / "chatlab" / "lab" / "session.py").is_file() and "fake setup" in proc.stdout
    assert not (content / "chatlab.unzip").exists()


def test_a_half_made_checkout_is_replaced(tmp_path: Path) -> None:
    """An interrupted earlier run left a folder without the package: the cell starts over."""
    clone = tmp_path / "content" / "chatlab"
    (clone / "chatlab").mkdir(parents=True)  # no __init__.py: not a checkout
    proc = run_cell(tmp_path, str(tmp_path / "nowhere"), clone)
    assert proc.returncode == 1 and "could not clone" in proc.stderr
    assert not clone.exists()
