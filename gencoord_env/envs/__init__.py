"""Environments. Each is an implementation module plus a tiny versioned re-export."""
from gencoord_env.envs import gencoord_v0

__all__ = ["gencoord_v0"]
