"""Training end to end: a few steps of the toy preset on the CPU, as a subprocess; and the
outputs checked before training starts, the shipped model written only when asked."""

import errno
import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

import tinyllm.train
from tinyllm import checkpoint, load
from tinyllm.checkpoint import MODEL_CARD, PRETRAINED, sha256, write_whole
from tinyllm.lab import bench, capture_policy, floor


def test_toy_training_lowers_the_loss(tmp_path, monkeypatch):
    """The command line's main(), in this process (its own interpreter would add seconds).
    The training topics are cut to their first 3000 characters (the validation topics are
    whole, as shipped): main() evaluates the whole training text at the end, and 30 steps
    see a few kB of it, so the learning asserted is the same at a third of the cost."""
    out = tmp_path / "toy-trained.safetensors"  # no --out: PRESET-trained.safetensors, here
    log, card = tmp_path / "log.json", tmp_path / "card.md"
    shipped = sha256(PRETRAINED)
    topics = tinyllm.train.topics_text()
    val_names = set(tinyllm.train.split_topics(topics)[1])
    cut = {k: v if k in val_names else v[:3000] for k, v in topics.items()}
    monkeypatch.setattr(tinyllm.train, "topics_text", lambda: cut)
    monkeypatch.chdir(tmp_path)
    tinyllm.train.main(
        ["--preset", "toy", "--steps", "30", "--batch", "8", "--seq-len", "64",
         "--eval-every", "5", "--device", "cpu", "--log", str(log), "--card", str(card)]
    )  # fmt: skip
    info = json.loads(log.read_text())
    hist = info["history"]
    assert hist["step"] == [0, 5, 10, 15, 20, 25, 29]
    train, val = hist["train_loss"], hist["val_loss"]
    # untrained, the model is near uniform over 258 ids: ln 258 = 5.55 nats
    assert abs(train[0] - math.log(258)) < 0.3
    # 30 steps learn the byte statistics: both losses fall by well over a nat
    assert train[-1] < train[0] - 1.0
    assert val[-1] < val[0] - 1.0
    assert min(val) == val[-1] or min(val) < val[0] - 1.0
    assert info["val_loss"] == round(min(val), 4)
    assert info["preset"] == "toy" and info["steps"] == 30
    assert info["val_bytes"] == sum(len(topics[k].encode()) + 1 for k in val_names)  # + EOS
    assert info["train_bytes"] < sum(len(topics[k]) for k in topics if k not in val_names)
    # the checkpoint written is the one the log describes, and it loads
    assert info["sha256"] == sha256(out)
    model = load(out, expected_sha256=info["sha256"])
    assert model.cfg.to_dict() == info["config"]
    assert info["sha256"] in card.read_text()
    # a toy run never touches the shipped weights
    assert sha256(PRETRAINED) == shipped


class TrainingStarted(Exception):
    pass


@pytest.fixture
def no_training(monkeypatch):
    """main() stops where training would start: nothing is trained or written."""

    def train(*args, **kwargs):
        raise TrainingStarted

    monkeypatch.setattr(tinyllm.train, "train", train)


@pytest.mark.parametrize(
    "args, shown",
    [
        (["--out", str(PRETRAINED)], f"--out {PRETRAINED} is the shipped tiny.safetensors"),
        (["--card", str(MODEL_CARD)], f"--card {MODEL_CARD} is the shipped MODEL_CARD.md"),
        (["--log", str(PRETRAINED)], f"--log {PRETRAINED} is the shipped tiny.safetensors"),
        (["--out", "weights/../weights/tiny.safetensors"], "is the shipped tiny.safetensors"),
        (["--out", "link.safetensors"], "--out link.safetensors is the shipped tiny.safetensors"),
    ],
)
def test_the_shipped_model_is_never_overwritten_unasked(
    tmp_path, monkeypatch, capsys, no_training, args, shown
):
    (tmp_path / "weights").symlink_to(PRETRAINED.parent)
    (tmp_path / "link.safetensors").symlink_to(PRETRAINED)
    monkeypatch.chdir(tmp_path)  # relative paths, and links, that lead to the shipped files
    with pytest.raises(SystemExit) as exit_:
        tinyllm.train.main(args)
    assert exit_.value.code == 2
    assert f"{shown}: pass --replace-shipped to overwrite it" in capsys.readouterr().err


def test_replace_shipped_lets_a_run_write_the_shipped_model(no_training):
    with pytest.raises(TrainingStarted):
        tinyllm.train.main(
            ["--out", str(PRETRAINED), "--card", str(MODEL_CARD), "--replace-shipped"]
        )


@pytest.mark.parametrize("flag", ["--out", "--card", "--log"])
def test_outputs_are_checked_before_training_starts(tmp_path, capsys, no_training, flag):
    for bad in (tmp_path / "no" / "such" / "file", tmp_path):
        with pytest.raises(SystemExit):
            tinyllm.train.main([flag, str(bad)])
        assert f"{flag} {bad}: not a file name in an existing folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, shown",
    [
        (["--out", "F", "--card", "F"], "--card F is also --out"),
        (["--out", "F", "--log", "./F"], "--log ./F is also --out"),
        (["--card", "C", "--log", "C"], "--log C is also --card"),
    ],
)
def test_one_output_never_overwrites_another(tmp_path, monkeypatch, capsys, no_training,
                                             args, shown):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        tinyllm.train.main(args)
    assert exit_.value.code == 2
    assert f"{shown}: give each output its own file" in capsys.readouterr().err


@pytest.fixture
def linked(tmp_path):
    """hard_link(target, name): a hard link to target, in a folder of tmp_path's filesystem or,
    where a hard link cannot cross to it, a temporary folder beside the repository's files."""
    made = []

    def hard_link(target, name):
        for folder in (tmp_path, None):
            if folder is None:
                folder = Path(tempfile.mkdtemp(dir=PRETRAINED.parent.parent.parent))
                made.append(folder)
            try:
                os.link(target, folder / name)
                return folder / name
            except OSError as e:
                if e.errno != errno.EXDEV:
                    raise
        raise AssertionError("no folder on the shipped files' filesystem")

    yield hard_link
    for folder in made:
        shutil.rmtree(folder)


@pytest.mark.parametrize(
    "flag, target", [("--log", PRETRAINED), ("--card", MODEL_CARD), ("--out", PRETRAINED)]
)
def test_a_hard_link_to_a_shipped_file_is_refused(capsys, no_training, linked, flag, target):
    link = linked(target, "hard-link")
    shipped = sha256(target)
    with pytest.raises(SystemExit) as exit_:
        tinyllm.train.main([flag, str(link)])
    assert exit_.value.code == 2
    assert f"is the shipped {target.name}: pass --replace-shipped" in capsys.readouterr().err
    assert sha256(target) == shipped


def test_save_refuses_a_hard_link_to_the_shipped_model(linked):
    from tinyllm import load_pretrained, save

    link = linked(PRETRAINED, "hard-link.safetensors")
    with pytest.raises(ValueError, match="is the shipped model"):
        save(load_pretrained("cpu"), link)


@pytest.mark.parametrize("flag", ["--out", "--card", "--log"])
def test_an_existing_output_is_refused_unless_forced(tmp_path, capsys, no_training, flag):
    mine = tmp_path / "mine.txt"
    mine.write_text("a learner's own file")
    with pytest.raises(SystemExit) as exit_:
        tinyllm.train.main([flag, str(mine)])
    assert exit_.value.code == 2
    assert f"{flag} {mine} exists: pass --force to overwrite it" in capsys.readouterr().err
    assert mine.read_text() == "a learner's own file"
    with pytest.raises(TrainingStarted):  # --force: the run goes on
        tinyllm.train.main([flag, str(mine), "--force"])


def test_a_write_that_fails_leaves_the_old_file_whole(tmp_path, monkeypatch):
    old = tmp_path / "log.json"
    old.write_text("the old log")

    def fails(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint.os, "replace", fails)
    with pytest.raises(OSError, match="disk full"):
        write_whole(old, lambda partial: Path(partial).write_text("the new log"))
    assert old.read_text() == "the old log"
    assert [p.name for p in tmp_path.iterdir()] == ["log.json"]  # no partial file left


def test_write_whole_replaces_a_link_instead_of_writing_through_it(tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("kept")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_whole(link, lambda partial: Path(partial).write_text("new"))
    assert target.read_text() == "kept" and link.read_text() == "new" and not link.is_symlink()


# The measuring commands write their results the same way: checked before they measure.
MEASURING = {
    "bench --out": lambda out, *more: bench.main(["--out", str(out), *more]),
    "bench --trace-out": lambda out, *more: bench.main(["--trace-out", str(out), *more]),
    "capture_policy": lambda out, *more: capture_policy.main([str(out), *more]),
    "floor": lambda out, *more: floor.main([str(out), *more]),
}


@pytest.mark.parametrize("command", MEASURING)
def test_a_measuring_command_refuses_an_existing_output_before_it_measures(
    tmp_path, capsys, monkeypatch, command
):
    mine = tmp_path / "mine.json"
    mine.write_text("a learner's own results")
    measured = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: measured.append(1) or False)
    with pytest.raises(SystemExit) as exit_:
        MEASURING[command](mine)
    assert exit_.value.code == 2
    assert f"{mine} exists: pass --force to overwrite it" in capsys.readouterr().err
    assert measured == [] and mine.read_text() == "a learner's own results"
    with pytest.raises(SystemExit, match="this machine has none"):  # --force: on to the GPU
        MEASURING[command](mine, "--force")
    assert measured and mine.read_text() == "a learner's own results"


@pytest.mark.parametrize("command", MEASURING)
def test_a_measuring_command_refuses_a_folder_or_a_missing_one(tmp_path, capsys, command):
    for out in (tmp_path, tmp_path / "missing" / "out.json"):
        with pytest.raises(SystemExit) as exit_:
            MEASURING[command](out)
        assert exit_.value.code == 2
        assert f"{out}: not a file name in an existing folder" in capsys.readouterr().err


def test_a_measuring_command_never_writes_the_shipped_weights(capsys, linked):
    link = linked(PRETRAINED, "hard-link.json")
    shipped = sha256(PRETRAINED)
    for command in MEASURING.values():
        with pytest.raises(SystemExit):
            command(link, "--force")
        assert "is the shipped tiny.safetensors: it is never written over here" in (
            capsys.readouterr().err)  # fmt: skip
    assert sha256(PRETRAINED) == shipped


def test_the_bench_refuses_an_unknown_section_before_it_measures(capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--sections", "paged,pagd"])
    assert exit_.value.code == 2
    assert "--sections paged,pagd: pagd not among steps" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "target"),
    [("--out", MODEL_CARD), ("--card", PRETRAINED), ("--log", PRETRAINED), ("--log", MODEL_CARD)],
)
def test_replace_shipped_writes_each_shipped_file_from_its_own_flag_only(
    capsys, no_training, flag, target
):
    shipped = sha256(target)
    with pytest.raises(SystemExit) as exit_:
        tinyllm.train.main([flag, str(target), "--replace-shipped"])
    assert exit_.value.code == 2
    assert f"is the shipped {target.name}: {flag} never writes it" in capsys.readouterr().err
    assert sha256(target) == shipped


def test_the_bench_refuses_one_file_for_its_result_and_its_trace(tmp_path, capsys):
    out = tmp_path / "same.json"
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--out", str(out), "--trace-out", str(out)])
    assert exit_.value.code == 2
    assert "--trace-out" in capsys.readouterr().err and not out.exists()


def test_write_whole_makes_a_file_as_open_would(tmp_path):
    path = tmp_path / "x.json"
    write_whole(path, lambda partial: Path(partial).write_text("{}"))
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
