"""Training side: programmatic SFT data (``data``), supervised fine-tuning (``sft``), GRPO on the env's
decision points (``decisions``, ``grpo``), closed-loop evaluation (``evaluate``)."""
