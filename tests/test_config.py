"""ModelConfig checks its own consistency; how large a model may be is the doors' (its bad
values are rows of tests/test_validate.py)."""

import dataclasses

import pytest

from tinyllm import Limits, ModelConfig, Transformer, get_config
from tinyllm.config import PRESETS
from tinyllm.validate import validate_size


def test_the_presets_are_valid_configs_within_the_limits():
    assert get_config("tiny") == ModelConfig()
    for cfg in PRESETS.values():
        assert ModelConfig(**cfg.to_dict()) == cfg
        validate_size(cfg)
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        get_config("huge")


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_the_parameter_count_of_the_limit_is_the_models(preset):
    """validate_size counts parameters from the shapes alone: a limit one below the real
    count refuses the config, the real count admits it."""
    cfg = PRESETS[preset]
    n = Transformer(cfg).n_params()
    validate_size(cfg, Limits(params=n))
    with pytest.raises(ValueError, match=f"parameters {n:,} > the course's limit {n - 1:,}"):
        validate_size(cfg, Limits(params=n - 1))


def test_a_changed_copy_is_checked_too():
    with pytest.raises(ValueError, match=r"n_layers must be an int >= 1, got 0"):
        dataclasses.replace(ModelConfig(), n_layers=0)
