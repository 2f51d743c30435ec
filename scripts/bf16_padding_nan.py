"""Where do NaN logits come from in bf16 sampling of left-padded batches? A check to run on a GPU.

``gencoord train grpo --pool procedural`` stopped at its first sampling step (NaN probabilities) with a
scratch model under bf16 autocast, while the same run on the train pool did not. What differs between
the two prompt sets (measured with the forward set's tokenizer, 64 episodes each): train prompts are
545-578 tokens, procedural ones 562-1,363, so a batch of procedural prompts carries up to ~800 left-pad
tokens where a train batch carries at most ~33.

The suspected cause: in a left-padded batch each pad query sees only pad keys, so its row of transformers'
boolean SDPA mask is all False (transformers 5 no longer corrects such rows). PyTorch's CPU kernels (math,
flash) return zeros for such a row (checked on the 2-core machine, fp32 and bf16: 0 NaN rows, every such row
zero), so no CPU run shows NaN: not with sdpa or eager, padding 0-800, autocast or bf16 weights, random or
SFT-trained weights. A CUDA kernel (memory-efficient, cuDNN) returning NaN there would spread to the real
positions in the next layer (0 * NaN). Measured on one H200 (2026-11-27, torch 2.11 + cu130, a random model of
the scratch shape): no kernel returned NaN on such rows and no run below met NaN, so this cause is not
confirmed there; the failing lane's own model (``--model``) has not been tried.
``gencoord_env.agents.lm.attention.PAD_SAFE_SDPA`` (what ``load_model`` and ``build_tiny`` give every SDPA
model) makes such rows attend to every key instead.

This script prints, on the device at hand: (1) each SDPA kernel on a mask with all-False rows (NaN rows,
zero rows); (2) a forward of left-padded batches for padding widths x attention implementation (plain
``sdpa``, ``PAD_SAFE_SDPA``, ``eager``) x precision (fp32, bf16 autocast over fp32 weights as the GRPO
trainer runs, bf16 weights), with NaN counted at real and at pad positions; (3) one sampled ``generate`` of
real procedural prompts per implementation and precision. The cause is confirmed where plain ``sdpa``
shows NaN and ``PAD_SAFE_SDPA`` none.

    python scripts/bf16_padding_nan.py                          # a random model of the scratch shape
    python scripts/bf16_padding_nan.py --model RUN/sft/final    # the model of the failing lane

The sizes are arguments so that the suite runs every case of the script on the CPU in seconds (a small
random model, short sequences, a few pad widths); the defaults are the sizes the GPU run measures.
"""
from __future__ import annotations

import argparse


import torch


def kernels(device: str) -> None:
    """Each SDPA kernel on query rows whose mask is all False."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    gen = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(2, 4, 64, 64, device=device, generator=gen) for _ in range(3))
    mask = torch.ones(2, 1, 64, 64, dtype=torch.bool, device=device).tril()
    mask[0, :, :, :20] = False  # 20 left-pad keys of row 0: its first 20 queries attend to nothing
    for dtype in (torch.float32, torch.bfloat16):
        for backend in (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION):
            try:
                with sdpa_kernel(backend):
                    out = torch.nn.functional.scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype), attn_mask=mask)
            except RuntimeError as e:
                print(f"kernel {backend.name:19} {str(dtype)[6:]:8}: not available ({str(e).splitlines()[0][:60]})")
                continue
            rows = out[0, :, :20]
            print(f"kernel {backend.name:19} {str(dtype)[6:]:8}: of 80 all-False rows {int(rows.isnan().any(-1).sum())} NaN, "
                  f"{int((rows == 0).all(-1).sum())} zero; NaN in attended rows {int(out[0, :, 20:].isnan().sum() + out[1].isnan().sum())}",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a checkpoint (default: a random model of `--scratch qwen3`'s shape)")
    ap.add_argument("--episodes", type=int, default=16, help="procedural episodes whose decisions make the sampled batch")
    ap.add_argument("--pads", default="0,33,64,128,256,800",
                    help="left-pad widths of the padded forwards, comma-separated (default: train's ~33 to procedural's ~800)")
    ap.add_argument("--length", type=int, default=560, help="real tokens per row of the padded forwards (default: a train prompt)")
    ap.add_argument("--hidden-size", type=int, default=256, help="hidden size of the random model (default: --scratch's)")
    ap.add_argument("--layers", type=int, default=4, help="layers of the random model (default: --scratch's)")
    ap.add_argument("--new-tokens", type=int, default=16, help="tokens sampled per prompt by the sampled generate")
    args = ap.parse_args()
    try:
        pads = [int(p) for p in args.pads.split(",")]
    except ValueError:
        ap.error(f"--pads takes comma-separated integers such as 0,33,800, not {args.pads!r}")
    from gencoord_env.agents.lm.attention import PAD_SAFE_SDPA
    from gencoord_env.agents.lm.loading import build_tiny, load_model, train_tokenizer
    from gencoord_env.agents.lm.prompt import prompt_text
    from gencoord_env.train.data import build_set
    from gencoord_env.train.decisions import decision_points

    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"device {device} ({torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}), torch {torch.__version__}")
    kernels(device)
    if args.model:
        lm = load_model(args.model, device=device, dtype=torch.float32)
    else:
        rows = build_set("forward")
        tok = train_tokenizer([r.prompt + "\n" + r.target for r in rows], vocab_size=2048)
        lm = build_tiny(tokenizer=tok, hidden_size=args.hidden_size, num_layers=args.layers, device=device, dtype=torch.float32)
    model, tok = lm.model, lm.tokenizer
    tok.padding_side = "left"
    vocab = model.get_input_embeddings().weight.shape[0]
    precisions = ("fp32", "autocast", "bf16")
    for impl in ("sdpa", PAD_SAFE_SDPA, "eager"):
        model.set_attn_implementation(impl)
        for pad in pads:
            ids = torch.randint(10, vocab, (2, args.length + pad), device=device)
            mask = torch.ones_like(ids)
            ids[0, :pad], mask[0, :pad] = tok.pad_token_id, 0
            for precision in precisions:
                model.to(torch.bfloat16 if precision == "bf16" else torch.float32)
                with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "autocast"):
                    logits = model(input_ids=ids, attention_mask=mask).logits
                nan = torch.isnan(logits).any(-1)
                print(f"{impl:13} pad {pad:3} {precision:8}: NaN at real positions "
                      f"{int(nan[0, pad:].sum()) + int(nan[1].sum())}, at pad positions {int(nan[0, :pad].sum())}", flush=True)
    prompts = [prompt_text(tok, p.prompt) for p in decision_points("procedural", "forward", episodes=args.episodes)]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    print(f"procedural batch: {len(prompts)} prompts of {int(enc['attention_mask'].sum(-1).min())}-"
          f"{int(enc['attention_mask'].sum(-1).max())} tokens")
    for impl in ("sdpa", PAD_SAFE_SDPA):
        model.set_attn_implementation(impl)
        for precision in precisions:
            model.to(torch.bfloat16 if precision == "bf16" else torch.float32)
            with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "autocast"):
                try:
                    model.generate(**enc, do_sample=True, max_new_tokens=args.new_tokens, pad_token_id=tok.pad_token_id)
                    print(f"sampled generate {impl:13} {precision:8}: ok", flush=True)
                except RuntimeError as e:
                    print(f"sampled generate {impl:13} {precision:8}: {str(e).splitlines()[0]}", flush=True)


if __name__ == "__main__":
    main()
