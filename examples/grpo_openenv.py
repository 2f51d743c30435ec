"""GRPO on gencoord_v0 over a running `gencoord serve`: TRL's environment_factory, the env's own reward.

    gencoord serve --port 8000 --backend sim --pool train --plays sender --partner rule --max-sessions 16
    python examples/grpo_openenv.py [MODEL [URL [STEPS]]]     # default: Qwen/Qwen3-0.6B, port 8000, 100 steps
"""
import sys

import torch
from trl import GRPOConfig, GRPOTrainer

from gencoord_env.commands.llm_rl import GencoordServerEnv

args = sys.argv[1:]
model = args[0] if len(args) > 0 else "Qwen/Qwen3-0.6B"
url = args[1] if len(args) > 1 else "http://127.0.0.1:8000"
steps = int(args[2]) if len(args) > 2 else 100
trainer = GRPOTrainer(
    model=model,
    train_dataset=GencoordServerEnv.dataset(url, range(256)),  # one row per episode: the shared prior, its index
    environment_factory=GencoordServerEnv.factory(base_url=url),  # a session per rollout; get_reward is the env's
    args=GRPOConfig(
        output_dir="grpo-gencoord", max_steps=steps, learning_rate=1e-6, logging_steps=1, report_to="none",
        per_device_train_batch_size=8, num_generations=8, max_completion_length=512,
        max_tool_calling_iterations=2,  # the sender commits once; the server's rule receiver does the rest
        chat_template_kwargs={"enable_thinking": False}, bf16=torch.cuda.is_available(),
    ),
)
trainer.train()
