from gencoord_env.envs.gencoord.aec import env
from gencoord_env.envs.gencoord.gencoord import parallel_env, raw_env

__all__ = ["env", "parallel_env", "raw_env"]
