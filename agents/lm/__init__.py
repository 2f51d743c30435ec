"""Learned (transformers) policies' model side: loading, offline construction and greedy generation."""

from __future__ import annotations

from gencoord_env.agents.lm.generate import GenerationConfig, GenerationRecord, Generator, kernel_report
from gencoord_env.agents.lm.loading import (
    LoadedModel,
    ModelLoadError,
    build_qwen35_08b_config,
    build_tiny,
    load_model,
    train_tokenizer,
)

__all__ = [
    "GenerationConfig",
    "GenerationRecord",
    "Generator",
    "LoadedModel",
    "ModelLoadError",
    "build_qwen35_08b_config",
    "build_tiny",
    "kernel_report",
    "load_model",
    "train_tokenizer",
]
