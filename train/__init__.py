"""Training side: programmatic SFT data (``data``), supervised fine-tuning (``sft``), closed-loop evaluation (``evaluate``)."""
