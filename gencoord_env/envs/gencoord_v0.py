from gencoord_env.envs.gencoord.gencoord import env, parallel_env, raw_env

__all__ = ["env", "parallel_env", "raw_env"]
