"""The pinned SGLang release (gridready/serving/sglang/versions.py) and a tier's version override: the pip spec
and the Docker Hub image follow the version; module and default port stay."""

from __future__ import annotations

from gridready.serving.sglang import versions


def test_the_pin_as_the_file_states_it() -> None:
    p = versions.pin()
    assert (p.version, p.pip_spec, p.image, p.module, p.default_port) == (
        "0.5.19", "sglang==0.5.19", "lmsysorg/sglang:v0.5.19-cu129", "sglang.launch_server", 30000)


def test_an_override_moves_version_pip_spec_and_image_together() -> None:
    p = versions.pin("0.5.20")
    assert (p.version, p.pip_spec, p.image, p.module, p.default_port) == (
        "0.5.20", "sglang==0.5.20", "lmsysorg/sglang:v0.5.20", "sglang.launch_server", 30000)
    assert versions.pin().version == "0.5.19"  # the cached pin is not changed by an override
