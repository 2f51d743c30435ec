"""Where do NaN logits come from in bf16 sampling of left-padded batches? A check to run on a GPU.

``gencoord train grpo --pool procedural`` stopped at its first sampling step (NaN probabilities) with a
scratch model under bf16 autocast, while the same run on the train pool did not. What differs between
the two prompt sets (measured with the forward set's tokenizer, 64 episodes each): train prompts are
545-578 tokens, procedural ones 562-1,363, so a batch of procedural prompts carries up to ~800 left-pad
tokens where a train batch carries at most ~33. On a CPU, bf16 autocast gives no NaN for either (sdpa
and eager, padding 0-800, random and SFT-trained weights). This script runs the same forward on the
device at hand, for padding widths x attention implementation x precision, and one sampled
``generate`` of real procedural prompts, and prints where NaN appears (at real positions or pad positions).

    python scripts/bf16_padding_nan.py                          # a random model of the scratch shape
    python scripts/bf16_padding_nan.py --model RUN/sft/final    # the model of the failing lane
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a checkpoint (default: a random model of `--scratch qwen3`'s shape)")
    ap.add_argument("--episodes", type=int, default=16, help="procedural episodes whose decisions make the sampled batch")
    args = ap.parse_args()
    from gencoord_env.agents.lm.loading import build_tiny, load_model, train_tokenizer
    from gencoord_env.agents.lm.prompt import prompt_text
    from gencoord_env.train.data import build_set
    from gencoord_env.train.decisions import decision_points

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.model:
        lm = load_model(args.model, device=device, dtype=torch.float32)
    else:
        rows = build_set("forward")
        tok = train_tokenizer([r.prompt + "\n" + r.target for r in rows], vocab_size=2048)
        lm = build_tiny(tokenizer=tok, hidden_size=256, num_layers=4, device=device, dtype=torch.float32)
    model, tok = lm.model, lm.tokenizer
    tok.padding_side = "left"
    print(f"device {device} ({torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}), torch {torch.__version__}")
    vocab = model.get_input_embeddings().weight.shape[0]
    for impl in ("sdpa", "eager"):
        model.set_attn_implementation(impl)
        for pad in (0, 33, 64, 128, 256, 800):
            ids = torch.randint(10, vocab, (2, 560 + pad), device=device)
            mask = torch.ones_like(ids)
            ids[0, :pad], mask[0, :pad] = tok.pad_token_id, 0
            for bf16 in (False, True):
                with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
                    logits = model(input_ids=ids, attention_mask=mask).logits
                nan = torch.isnan(logits).any(-1)
                print(f"{impl:5} pad {pad:3} {'bf16' if bf16 else 'fp32'}: NaN at real positions "
                      f"{int(nan[0, pad:].sum()) + int(nan[1].sum())}, at pad positions {int(nan[0, :pad].sum())}", flush=True)
    model.set_attn_implementation("sdpa")
    prompts = [prompt_text(tok, p.prompt) for p in decision_points("procedural", "forward", episodes=args.episodes)]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    print(f"procedural batch: {len(prompts)} prompts of {int(enc['attention_mask'].sum(-1).min())}-"
          f"{int(enc['attention_mask'].sum(-1).max())} tokens")
    for bf16 in (False, True):
        with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            try:
                model.generate(**enc, do_sample=True, max_new_tokens=16, pad_token_id=tok.pad_token_id)
                print(f"sampled generate ({'bf16' if bf16 else 'fp32'}): ok")
            except RuntimeError as e:
                print(f"sampled generate ({'bf16' if bf16 else 'fp32'}): {str(e).splitlines()[0]}")


if __name__ == "__main__":
    main()
