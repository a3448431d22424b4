"""The release workflow (.github/workflows/release.yml) cannot run here: this checks it parses and
builds every platform memci ships, the sdist, and publishes them all by trusted publishing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

WORKFLOW = Path(__file__).resolve().parents[1] / ".github" / "workflows" / "release.yml"
MATURIN = "PyO3/maturin-action@v1"


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    parsed = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(parsed, dict)
    return parsed


def maturin_steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for step in job["steps"] if step.get("uses") == MATURIN]


def built(workflow: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(job, target, platform tag) of every wheel the workflow builds."""
    wheels = set()
    for name, job in workflow["jobs"].items():
        for step in maturin_steps(job):
            if step["with"].get("command", "build") != "build":
                continue
            platforms = job.get("strategy", {}).get("matrix", {}).get("platform", [{}])
            for platform in platforms:
                target = step["with"]["target"].replace("${{ matrix.platform.target }}", platform.get("target", ""))
                tag = step["with"].get("manylinux", "").replace("${{ matrix.platform.tag }}", platform.get("tag", ""))
                assert "--release" in step["with"]["args"].split(), name
                wheels.add((name, target, tag))
    return wheels


def test_it_runs_on_a_version_tag_and_by_hand(workflow: dict[str, Any]) -> None:
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert triggers["push"]["tags"] == ["v*"]
    assert "workflow_dispatch" in triggers


def test_it_builds_a_wheel_for_every_platform(workflow: dict[str, Any]) -> None:
    assert built(workflow) == {
        ("linux", "x86_64", "2_17"),
        ("linux", "aarch64", "2_17"),
        ("linux", "x86_64", "musllinux_1_2"),
        ("linux", "aarch64", "musllinux_1_2"),
        ("macos", "x86_64", ""),
        ("macos", "aarch64", ""),
        ("windows", "x64", ""),
    }


def test_the_wheels_it_can_run_are_installed_and_imported(workflow: dict[str, Any]) -> None:
    for name in ("linux", "macos", "windows"):
        runs = [step.get("run", "") for step in workflow["jobs"][name]["steps"]]
        assert any("scripts/check_install.sh" in run for run in runs), name
    assert any("auditwheel show" in step.get("run", "") for step in workflow["jobs"]["linux"]["steps"])
    assert Path(WORKFLOW.parents[2] / "scripts" / "check_install.sh").is_file()


def test_it_builds_the_sdist(workflow: dict[str, Any]) -> None:
    (step,) = maturin_steps(workflow["jobs"]["sdist"])
    assert step["with"]["command"] == "sdist"


def test_it_publishes_everything_by_trusted_publishing_on_a_tag_only(workflow: dict[str, Any]) -> None:
    publish = workflow["jobs"]["publish"]
    assert set(publish["needs"]) == set(workflow["jobs"]) - {"publish"}
    assert publish["if"] == "startsWith(github.ref, 'refs/tags/v')"
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["environment"]["name"] == "pypi"
    (upload,) = maturin_steps(publish)
    assert upload["with"]["command"] == "upload"
    # Trusted publishing: no stored token or password anywhere in the workflow.
    assert "secrets." not in WORKFLOW.read_text()
    assert "MATURIN_PYPI_TOKEN" not in WORKFLOW.read_text()
    uploads = [
        step for job in workflow["jobs"].values() for step in job["steps"] if "upload-artifact" in step.get("uses", "")
    ]
    uploaded = {step["with"]["name"].split("${{")[0] for step in uploads}
    (download,) = [step for step in publish["steps"] if step.get("uses", "").startswith("actions/download-artifact")]
    assert all(name.startswith(download["with"]["pattern"].rstrip("*")) for name in uploaded)
