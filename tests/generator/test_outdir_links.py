"""`generate --out DIR` never writes through a link planted in DIR, and refuses a symlinked DIR pointing elsewhere."""

import pytest

from perfledger.generator.api import generate
from perfledger.generator.errors import GeneratorError
from perfledger.generator.outdir import MANIFEST, write_output

from .conftest import EXAMPLES


def test_a_symlink_planted_at_an_artifact_name_is_replaced_not_followed(tmp_path):
    outside = tmp_path / "victim.txt"
    outside.write_text("precious")
    out = tmp_path / "out"
    names = [str(p.relative_to(out)) for p in generate(EXAMPLES / "vllm_agg.yaml", [], out).files]
    for name in [*names, MANIFEST]:
        (out / name).unlink()
        (out / name).symlink_to(outside)
    result = generate(EXAMPLES / "vllm_agg.yaml", [], out)
    assert outside.read_text() == "precious"
    assert all(p.is_file() and not p.is_symlink() for p in [*result.files, out / MANIFEST])


def test_a_symlinked_sub_folder_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "sub").symlink_to(elsewhere)
    with pytest.raises(GeneratorError, match="is a symlink or file, not a folder"):
        write_output(out, {"sub/run.sh": "echo hi\n"})
    assert not any(elsewhere.iterdir())


def test_a_symlinked_output_folder_into_another_tree_needs_explicit_consent(tmp_path):
    target = tmp_path / "other-tree" / "deploy"
    target.mkdir(parents=True)
    (tmp_path / "mine").mkdir()
    link = tmp_path / "mine" / "out"
    link.symlink_to(target)
    with pytest.raises(GeneratorError, match="is a symlink to .* outside"):
        write_output(link, {"run.sh": "echo hi\n"})
    assert not any(target.iterdir())
    written, _ = write_output(link, {"run.sh": "echo hi\n"}, allow_symlinked_out=True)
    assert (target / "run.sh").read_text() == "echo hi\n" and written[0].stat().st_mode & 0o111


def test_generate_cli_writes_into_a_symlinked_out_only_with_allow_symlinked_out(tmp_path):
    from typer.testing import CliRunner

    from perfledger.cli import app

    target = tmp_path / "other-tree" / "deploy"
    target.mkdir(parents=True)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "out").symlink_to(target)
    args = ["generate", str(EXAMPLES / "vllm_agg.yaml"), "--out", str(tmp_path / "mine" / "out")]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 1 and "is a symlink to" in refused.stderr and "--allow-symlinked-out" in refused.stderr
    assert not any(target.iterdir())
    allowed = CliRunner().invoke(app, [*args, "--allow-symlinked-out"])
    assert allowed.exit_code == 0, allowed.output
    assert (target / "run_0.sh").is_file() and (target / MANIFEST).is_file()
